"""judge: an LLM grades a run against a rubric (layer 3).

The collector calls the model beside the pipeline (collector/judges/); this module holds what is
pure and testable without a network: the rule's config, which runs are sampled, the prompt a run
renders to, how the model's answer is read and what verdict it gives.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment
from pydantic import Field, field_validator, model_validator

from evaluators.base import Finding, Verdict
from evaluators.durations import Seconds
from evaluators.matchers import Strict
from evaluators.model import STEP_KINDS, Step, Trajectory
from evaluators.rules import RuleBase

# The structured output every judge is asked for (OpenAI `response_format: json_schema`).
JUDGEMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "label": {"type": "string"},
        "explanation": {"type": "string"},
    },
    "required": ["score", "label", "explanation"],
    "additionalProperties": False,
}
# Steps a judge sees unless its rule says otherwise: what the agent did, not its LLM turns.
TOOL_KINDS = ("tool", "retrieval", "approval", "policy", "state_change", "handoff")
# Prompts are pack text: rendered in a sandbox, and a name the template does not know is an
# error at load time instead of an empty string at run time.
TEMPLATES = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


class JudgeEndpoint(Strict):
    """Any OpenAI-compatible chat completions server: vLLM, llama.cpp, Ollama, a provider."""

    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1 (/chat/completions follows).")
    model: str = Field(min_length=1, description="The model the server is asked for.")
    api_key_env: str | None = Field(
        None, description="Environment variable holding the key (sent as a bearer token)."
    )
    timeout: Seconds = Field(30.0, description="Per call; a call past it is `judge_unavailable`.")
    max_tokens: int = Field(512, ge=16, description="Most tokens the judge may answer with.")

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")


class JudgePrice(Strict):
    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")


class JudgeSettings(Strict):
    """A pack's judges: where they call, what they may spend, how far they are trusted."""

    endpoint: JudgeEndpoint
    price: JudgePrice | None = Field(
        None, description="The model's price; without it the collector's price table applies."
    )
    calls_per_minute: int | None = Field(None, ge=1, description="Most calls in any minute.")
    usd_per_hour: float | None = Field(None, gt=0, description="Most spend in any hour.")
    concurrency: int = Field(4, ge=1, le=256, description="Calls in flight at once.")
    min_tpr: float = Field(
        0.8, gt=0, le=1, description="Card's lower bound on the true-positive rate to gate."
    )
    min_tnr: float = Field(
        0.8, gt=0, le=1, description="Card's lower bound on the true-negative rate to gate."
    )


class PassWhen(Strict):
    score_gte: float | None = Field(None, ge=0, le=1, description="Pass at this score or more.")
    labels: list[str] | None = Field(None, min_length=1, description="Pass on these labels.")

    @model_validator(mode="after")
    def _something(self) -> PassWhen:
        if self.score_gte is None and self.labels is None:
            raise ValueError("give `score_gte`, `labels` or both")
        return self


class JudgeRule(RuleBase):
    type: Literal["judge"]
    prompt: str = Field(
        min_length=1,
        description="Rubric template (Jinja): request, answer, expected, steps, trace_id,"
        " service, agent.",
    )
    pass_when: PassWhen = Field(description="What the judgement must be to pass.")
    model: str | None = Field(None, description="Overrides the pack endpoint's model.")
    sample: float = Field(
        1.0, gt=0, le=1, description="Share of runs judged, chosen by trace id hash."
    )
    steps: list[Literal[STEP_KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(TOOL_KINDS), description="Step kinds shown to the judge."
    )
    max_chars: int = Field(4000, ge=100, description="Each text shown is cut to this length.")

    @field_validator("prompt")
    @classmethod
    def _template(cls, value: str) -> str:
        try:
            TEMPLATES.from_string(value).render(**example_context())
        except TemplateError as exc:
            raise ValueError(f"prompt template: {exc}") from exc
        return value


def example_context() -> dict[str, Any]:
    """Every name a prompt may use, with a value of its type: a load-time check that the
    template only names what a run provides."""
    step = dict(seq=1, kind="tool", name="", status="ok", arguments="", result="")
    return {
        "request": "",
        "answer": "",
        "expected": None,
        "steps": [step],
        "trace_id": "",
        "service": "",
        "agent": "",
    }


def sampled(trace_id: str, share: float) -> bool:
    """Whether the run is judged: the same trace always gets the same answer, on every replica
    and after a restart, and at a share s about s of the traces are."""
    if share >= 1:
        return True
    digest = hashlib.sha256(trace_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def cut(text: str | None, limit: int) -> str:
    if text is None:
        return ""
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} chars cut]"


def step_view(step: Step, limit: int) -> dict[str, Any]:
    arguments = step.arguments
    if arguments is not None and not isinstance(arguments, str):
        arguments = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return {
        "seq": step.seq,
        "kind": step.kind,
        "name": step.tool_name or step.name,
        "status": step.status,
        "arguments": cut(arguments, limit),
        "result": cut(step.result, limit),
    }


def render_prompt(rule: JudgeRule, t: Trajectory, expected: str | None = None) -> str:
    """The prompt one run renders to: its request, final answer, chosen steps, the expected
    answer of its case when there is one."""
    limit = rule.max_chars
    return TEMPLATES.from_string(rule.prompt).render(
        request=cut(t.input, limit),
        answer=cut(t.final_output, limit),
        expected=cut(expected, limit) if expected is not None else None,
        steps=[step_view(s, limit) for s in t.steps if s.kind in rule.steps],
        trace_id=t.trace_id,
        service=t.service_name or "",
        agent=t.agent_name or "",
    )


@dataclass(frozen=True)
class Judgement:
    score: float
    label: str
    explanation: str


class MalformedJudgement(ValueError):
    """The model answered, but not with the judgement asked for."""


def parse_judgement(content: str) -> Judgement:
    """The judgement in a model's message: a JSON object (a fenced block is accepted, as small
    local models often add one) with a score in [0, 1], a label and an explanation."""
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise MalformedJudgement(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise MalformedJudgement("not a JSON object")
    score = value.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise MalformedJudgement(f"score must be a number in [0, 1], got {score!r}")
    label, explanation = value.get("label", ""), value.get("explanation", "")
    if not isinstance(label, str) or not isinstance(explanation, str):
        raise MalformedJudgement("label and explanation must be strings")
    return Judgement(float(score), label, explanation)


def judged_finding(rule: JudgeRule, judgement: Judgement) -> Finding:
    """The verdict of a judgement under the rule's `pass_when` (every condition given holds)."""
    when = rule.pass_when
    passed = (when.score_gte is None or judgement.score >= when.score_gte) and (
        when.labels is None or judgement.label in when.labels
    )
    message = f"{judgement.label} ({judgement.score:.2f}): {judgement.explanation}"
    return Finding(Verdict.PASS if passed else Verdict.FAIL, message, score=judgement.score)
