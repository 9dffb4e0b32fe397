"""The decision engine's and the alert channels' sections of SextantConfig."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from collector.config.sections import Seconds, Strict
from evaluators.base import Decision


class DecisionsConfig(Strict):
    interval_seconds: Seconds = Field(5.0, gt=0, description="How often decisions are evaluated.")
    wake_gap_seconds: Seconds = Field(
        0.05,
        ge=0,
        le=1,
        description="A stored fail or review result runs a round at once, but at most one such"
        " extra round per this gap: a burst of results costs one round, not one per commit.",
    )
    window_seconds: Seconds = Field(
        600.0, gt=0, description="Window of a failed rule's on_fail when no policy covers it."
    )
    resolve_after_seconds: Seconds = Field(
        300.0, ge=0, description="A decision without a policy resolves once clear this long."
    )
    max_targets: int = Field(
        1000, gt=0, description="Targets with their own metric labels; the rest share _overflow."
    )
    max_eval_backlog: int = Field(
        10_000, gt=0, description="Traces waiting to be built beyond which coverage is lost."
    )
    # Off unless asked for, as Prometheus alerts on a missing series only where a rule says
    # absent(): an idle collector (a laptop, a quiet night) is not a failure of every target.
    no_data: Literal["review", "ignore"] = Field(
        "ignore",
        description="What a target that stops sending trajectories gets: ignore (nothing), or"
        " review (REVIEW no_data after no_data_after_seconds) where every target is expected"
        " to keep sending.",
    )
    no_data_after_seconds: Seconds = Field(
        1800.0, gt=0, description="Silence after which a target that was sending gets no_data."
    )
    lookback_seconds: Seconds = Field(
        86_400.0, gt=0, description="How far back a target counts as known (PASS gauge, no_data)."
    )
    recertify: list[Decision] = Field(
        default_factory=list,
        description="Decisions a person may resolve only once a dataset replays clean under the"
        " packs in force, e.g. [QUARANTINE, ROLLBACK]: the dataset named on the resolve, else"
        " the one named by the decision id (made from its evidence, which must then PASS).",
    )
    review_backlog_seconds: Seconds = Field(
        30.0,
        ge=0,
        description="How often a round reads the review backlog (items waiting for a label)"
        " from the store; the rounds between reuse the last read. An item past its pack's"
        " review.sla raises its decision, and a labelled one clears, within this time.",
    )


class AlertmanagerChannel(Strict):
    url: str = Field(description="Alertmanager base URL, e.g. http://alertmanager:9093.")
    name: str = Field("alertmanager", description="Channel name in metrics and `alerts test`.")
    resend_seconds: Seconds = Field(
        60.0, gt=0, description="Firing alerts are re-sent this often (Alertmanager expects it)."
    )


class WebhookChannel(Strict):
    url: str = Field(description="URL that receives a JSON POST per alert.")
    name: str = Field("webhook", description="Channel name in metrics and `alerts test`.")
    secret: SecretStr | None = Field(
        None, description="HMAC-SHA256 key; the signature goes in X-Sextant-Signature."
    )
    renotify_seconds: Seconds = Field(
        3600.0, gt=0, description="A firing decision is sent again this often."
    )


AlertSeverity = Literal["critical", "warning", "info", "none"]
# The `severity` label of a decision's alert unless `alerts.severity` says otherwise.
DEFAULT_SEVERITY: dict[Decision, AlertSeverity] = {
    Decision.DISABLE: "critical",
    Decision.ROLLBACK: "critical",
    Decision.QUARANTINE: "critical",
    Decision.DOWNGRADE: "warning",
    Decision.FAIL: "warning",
    Decision.REVIEW: "info",
    Decision.PASS: "none",
}


class AlertsConfig(Strict):
    alertmanager: list[AlertmanagerChannel] = Field(
        default_factory=list, description="Alertmanager v2 APIs to send decisions to."
    )
    webhooks: list[WebhookChannel] = Field(
        default_factory=list, description="Generic JSON webhooks to send decisions to."
    )
    external_url: str = Field(
        "",
        description="Base URL of this Sextant's admin port, which alerts link to (the console's"
        " decision and trajectory pages); default: its address.",
    )
    queue_size: int = Field(1000, gt=0, description="Alerts waiting per channel; beyond, dropped.")
    max_attempts: int = Field(5, ge=1, description="Delivery attempts per alert.")
    backoff_seconds: Seconds = Field(
        1.0, gt=0, description="First retry delay; it doubles per attempt."
    )
    timeout_seconds: Seconds = Field(
        5.0,
        gt=0,
        description="Total deadline of one delivery attempt: connecting, sending and the whole"
        " reply (a receiver that trickles bytes cannot stretch it).",
    )
    severity: dict[Decision, AlertSeverity] = Field(
        default_factory=dict,
        description="The `severity` label per decision, over the defaults: critical for DISABLE,"
        " ROLLBACK and QUARANTINE, warning for DOWNGRADE and FAIL, info for REVIEW.",
    )
    insufficient_samples_severity: AlertSeverity = Field(
        "info",
        description="The `severity` label of a REVIEW whose only reason is insufficient_samples"
        " (a new canary short of its min_samples): a state of the target, not a page.",
    )
