"""Window rules (drift, reliability): config models of rules evaluated over many trajectories.

They live in packs like every rule, but the engine does not run them per trajectory: the
collector evaluates them on a schedule (`interval`) over the store.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import Field, model_validator

from evaluators.durations import Seconds
from evaluators.matchers import Strict
from evaluators.rules import RuleBase

DriftMetric = Literal[
    "tool_choice", "steps", "latency", "cost", "tokens", "error_rate", "pass_rate"
]
DRIFT_METRICS: tuple[DriftMetric, ...] = get_args(DriftMetric)
# Effect sizes: Jensen-Shannon distance (tool_choice), KS distance D (continuous), absolute
# difference of rates (error_rate, pass_rate).
DEFAULT_THRESHOLDS: dict[str, float] = {
    "tool_choice": 0.1,
    "steps": 0.2,
    "latency": 0.2,
    "cost": 0.2,
    "tokens": 0.2,
    "error_rate": 0.05,
    "pass_rate": 0.05,
}
# Relative shares of alpha in an anytime-valid canary: whether the agent still does its job
# first. A metric made of several tests (the tool mix, one per tool; the pass rates, overall
# and per rule) splits its share equally between them.
DEFAULT_WEIGHTS: dict[str, float] = {"pass_rate": 4.0}
WEIGHT_KEY = re.compile(
    r"^(tool_choice|steps|latency|cost|tokens|error_rate|pass_rate)"
    r"(:[a-z0-9][a-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*)?$"
)


class WindowRule(RuleBase):
    interval: Seconds = Field(60.0, description="How often the rule is evaluated (e.g. 60s, 5m).")

    @model_validator(mode="after")
    def _no_when(self) -> WindowRule:
        if self.when is not None:
            raise ValueError(
                "`when` filters single runs; a window rule selects targets by the pack selector"
            )
        return self


class BaselineWindow(Strict):
    """What the current window is compared with: exactly one of `last`, `version`, `snapshot`."""

    last: Seconds | None = Field(
        None,
        description="The time before the current window (e.g. 7d); alone, or to bound"
        " a pinned `version`.",
    )
    version: str | None = Field(None, description="A pinned service.version (glob), e.g. 1.4.*")
    snapshot: str | None = Field(None, description="A baseline saved with `sextant baseline save`.")

    @model_validator(mode="after")
    def _one_source(self) -> BaselineWindow:
        if self.version is not None and self.snapshot is not None:
            raise ValueError("give `version` or `snapshot`, not both")
        if self.snapshot is not None and self.last is not None:
            raise ValueError("a snapshot is frozen; `last` does not apply to it")
        if self.last is None and self.version is None and self.snapshot is None:
            raise ValueError("give one of `last`, `version` or `snapshot`")
        return self


class CurrentWindow(Strict):
    last: Seconds = Field(3600.0, description="The sliding window (e.g. 1h).")
    runs: int | None = Field(None, ge=1, description="Only the target's last N runs within `last`.")


class CanarySide(Strict):
    version: str = Field(alias="service.version", description="service.version glob.")


class Canary(Strict):
    baseline: CanarySide = Field(description="The versions in production, e.g. 1.4.*")
    candidate: CanarySide = Field(description="The versions being rolled out, e.g. 1.5.*")


class DriftRule(WindowRule):
    type: Literal["drift"]
    baseline: BaselineWindow | None = Field(None, description="Compare with this baseline...")
    compare: Canary | None = Field(None, description="...or a canary: two versions, one window.")
    current: CurrentWindow = Field(default_factory=CurrentWindow, description="Current window.")
    metrics: list[DriftMetric] = Field(
        default_factory=lambda: list(DRIFT_METRICS), min_length=1, description="What to compare."
    )
    thresholds: dict[DriftMetric, float] = Field(
        default_factory=dict, description="Effect size over which a significant change fails."
    )
    alpha: float = Field(
        0.01, gt=0, lt=1, description="Chance of failing an unchanged target (all its tests)."
    )
    correction: Literal["holm", "none"] = Field(
        "holm",
        description="holm: alpha bounds a false failure of any of the rule's tests of a"
        " target; none: each test at alpha on its own (false failures add up).",
    )
    min_samples: int = Field(30, ge=2, description="Fewer runs (or cases) on a side: review.")
    sequential: bool | None = Field(
        None,
        description="Canaries only (default true with `compare`): anytime-valid tests over the"
        " canary's life, from its first run, so that alpha bounds a false failure over every"
        " look; false: fixed-sample tests of the current window, valid for one look.",
    )
    horizon: int = Field(
        120,
        ge=2,
        description="Anytime-valid canaries: the runs a side by which the canary should be"
        " decided; most of alpha is spent on an exact test when both versions reach it.",
    )
    weights: dict[str, float] = Field(
        default_factory=dict,
        description="Anytime-valid canaries: relative share of alpha per metric (or"
        " pass_rate:PACK/RULE), default pass_rate 4 and every other metric 1.",
    )

    @model_validator(mode="after")
    def _one_baseline(self) -> DriftRule:
        if (self.baseline is None) == (self.compare is None):
            raise ValueError("give exactly one of `baseline` or `compare` (a canary)")
        if self.sequential and self.compare is None:
            raise ValueError(
                "`sequential` needs `compare`: a canary has a first run to start from; a"
                " baseline window is judged one look at a time"
            )
        for key, value in self.weights.items():
            if not WEIGHT_KEY.match(key):
                raise ValueError(
                    f"weights: {key!r} is not a metric ({', '.join(DRIFT_METRICS)})"
                    " or pass_rate:PACK/RULE"
                )
            if not value > 0:
                raise ValueError(f"weights: {key!r} must be positive")
        for field in ("weights", "horizon"):
            if field in self.model_fields_set and not self.is_sequential:
                raise ValueError(
                    f"`{field}` applies to anytime-valid canaries (`compare`, sequential)"
                )
        return self

    @property
    def is_sequential(self) -> bool:
        """Whether the rule is judged with anytime-valid tests over the canary's life."""
        return self.compare is not None and self.sequential is not False

    def weight(self, metric: str) -> float:
        """The relative share of alpha of `metric` (or pass_rate:PACK/RULE)."""
        if metric in self.weights:
            return self.weights[metric]
        name = metric.split(":")[0]
        return self.weights.get(name, DEFAULT_WEIGHTS.get(name, 1.0))

    def threshold(self, metric: str) -> float:
        """The effect size over which `metric` fails: the rule's own, else the default."""
        own = {str(name): value for name, value in self.thresholds.items()}
        return own.get(metric, DEFAULT_THRESHOLDS[metric])


RELIABILITY_METRICS = ("pass_at_k", "pass_hat_k", "consistency")


class ReliabilityRule(WindowRule):
    type: Literal["reliability"]
    metric: Literal["pass_at_k", "pass_hat_k", "consistency"] = Field(
        description="pass_at_k, pass_hat_k (pass^k) or consistency (outcome consistency)."
    )
    k: int = Field(1, ge=1, le=1000, description="Attempts per draw for pass@k and pass^k.")
    min: float = Field(ge=0, le=1, description="The target's average over cases must reach it.")
    window: CurrentWindow = Field(
        default_factory=lambda: CurrentWindow(last=7 * 86400), description="Runs considered."
    )
    rule: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="pack/rule whose pass counts as the attempt's pass (default: the verdict).",
    )
    min_cases: int = Field(1, ge=1, description="Fewer cases with at least k attempts: review.")
