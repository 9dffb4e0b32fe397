"""The pure half of `judge` rules: pack syntax, sampling, prompts, reading a model's answer."""

from __future__ import annotations

import pytest

from collector.judges.cards import wilson_lower
from evaluators.base import Verdict
from evaluators.judge import (
    MalformedJudgement,
    judged_finding,
    parse_judgement,
    render_prompt,
    sampled,
)
from evaluators.model import Step, Trajectory
from evaluators.rulepack import RulePackError, load_text

PACK = """\
name: judges
version: 1.0.0
owner: sre
judges:
  endpoint: {base_url: "http://127.0.0.1:9/v1", model: m}
rules:
  - id: helpful
    type: judge
    reason: unhelpful
    prompt: "Q: {{ request }} A: {{ answer }} {% for s in steps %}[{{ s.name }}]{% endfor %}"
    pass_when: {score_gte: 0.5, labels: [helpful]}
"""


def rule():
    return load_text(PACK, "judges.yaml").pack.rules[0]


def test_a_prompt_naming_what_no_run_has_is_refused_at_its_line() -> None:
    broken = PACK.replace("{{ answer }}", "{{ answr }}")
    with pytest.raises(RulePackError) as caught:
        load_text(broken, "judges.yaml")
    assert "judges.yaml:10" in str(caught.value) and "'answr' is undefined" in str(caught.value)


def test_judge_rules_need_the_packs_endpoint() -> None:
    without = PACK.replace(
        'judges:\n  endpoint: {base_url: "http://127.0.0.1:9/v1", model: m}\n', ""
    )
    with pytest.raises(RulePackError, match="judge rules need the pack's `judges:`"):
        load_text(without, "judges.yaml")


def test_sampling_is_by_trace_id_and_keeps_its_share() -> None:
    ids = [f"{i:032x}" for i in range(20_000)]
    chosen = [t for t in ids if sampled(t, 0.25)]
    assert 0.24 < len(chosen) / len(ids) < 0.26
    assert chosen == [t for t in ids if sampled(t, 0.25)]  # the same traces every time
    assert set(chosen) <= {t for t in ids if sampled(t, 0.5)}  # a larger share takes them in


def test_the_prompt_shows_the_request_answer_and_tool_steps() -> None:
    steps = [
        Step(1, "a", None, 0, "llm", "llm", "chat", "ok", 0, 1),
        Step(2, "b", None, 0, "tool", "tool", "execute_tool", "ok", 1, 2, tool_name="lookup"),
    ]
    t = Trajectory(
        "t" * 32,
        1,
        "ok",
        "complete",
        True,
        "svc",
        "agent",
        "1",
        steps=steps,
        input="where?",
        final_output="x" * 5000,
    )
    prompt = render_prompt(rule(), t)
    assert prompt.startswith("Q: where? A: " + "x" * 4000 + "… [1000 chars cut]")
    assert prompt.endswith("[lookup]")


@pytest.mark.parametrize(
    "content",
    [
        '{"score": 0.8, "label": "helpful", "explanation": "fine"}',
        '```json\n{"score": 0.8, "label": "helpful", "explanation": "fine"}\n```',
    ],
)
def test_a_judgement_is_read_from_json(content: str) -> None:
    judgement = parse_judgement(content)
    assert (judgement.score, judgement.label) == (0.8, "helpful")
    assert judged_finding(rule(), judgement).verdict == Verdict.PASS


@pytest.mark.parametrize(
    "content",
    [
        "8/10",
        "[0.8]",
        '{"score": 1.5, "label": "x"}',
        '{"score": true}',
        '{"label": 3, "score": 0}',
    ],
)
def test_anything_else_is_malformed(content: str) -> None:
    with pytest.raises(MalformedJudgement):
        parse_judgement(content)


def test_every_condition_of_pass_when_must_hold() -> None:
    high_but_wrong_label = parse_judgement('{"score": 0.9, "label": "rude", "explanation": ""}')
    assert judged_finding(rule(), high_but_wrong_label).verdict == Verdict.FAIL


def test_wilson_lower_bounds() -> None:
    # The two-sided 95 % Wilson interval by hand: p = 0.9, n = 50, z = 1.959964.
    z, p, n = 1.959964, 0.9, 50
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    assert wilson_lower(45, 50) == pytest.approx(centre - half, abs=1e-6)
    assert wilson_lower(0, 0) is None
