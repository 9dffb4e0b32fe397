"""`judge` rules against a scripted OpenAI-compatible server, on runs sent by the real OTel SDK:
judgements stored with their cost, failures reviewed, budgets and sampling kept, and a judge
that hangs holding up nothing but its own judgements."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from collector.bench.judge import ScriptedJudge, start_judge
from evaluators.judge import sampled
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.cli import sextant
from tests.support.server import FAST, RunningServer, serve
from tests.support.wait import wait_for

KEY_ENV = "SEXTANT_TEST_JUDGE_KEY"
PROMPT = """
Grade the support agent's answer.
Request: {{ request }}
Answer: {{ answer }}
Steps:
{% for s in steps %}- {{ s.seq }} {{ s.name }} {{ s.arguments }} -> {{ s.result }}
{% endfor %}
"""


def judge_pack(url: str, extra: str = "", rule: str = "", **settings: object) -> str:
    lines = "".join(f"\n  {k}: {v}" for k, v in settings.items())
    return f"""
name: support-judges
version: 1.0.0
owner: support-sre
selector: {{service: support-desk}}
judges:
  endpoint: {{base_url: "{url}", model: judge-mini, api_key_env: {KEY_ENV}, timeout: 1s}}
  price: {{input: 0.5, output: 2.0}}{lines}
rules:
  - id: helpful-answer
    type: judge
    reason: unhelpful_answer
    on_fail: QUARANTINE
    prompt: {PROMPT!r}
    pass_when: {{score_gte: 0.5}}{rule}
  - id: looks-the-customer-up
    type: presence
    reason: no_lookup
    step: {{kind: tool, name: lookup_customer}}
{extra}"""


@pytest.fixture
def judge_server() -> Iterator[ScriptedJudge]:
    scripted = start_judge()
    yield scripted
    scripted.close()


def run(server: RunningServer, answer: str) -> str:
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="support-desk"
    )
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Where is my parcel?", answer) as root:
        script.chat([("lookup_customer", {"customer": "C-1"})])
        script.tool("lookup_customer", {"customer": "C-1"}, "parcel P-7 left the depot")
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def judged(server: RunningServer, trace_ids: list[str], pack: str = "support-judges") -> dict:
    """The judge results of these runs (trace id -> row), once every one has its result."""

    def fetch() -> dict | None:
        rows = server.query_dicts(
            "SELECT * FROM results WHERE rule_type IN ('judge', 'similarity') AND pack = ?"
            " AND trace_id IN ?",
            [pack, trace_ids],
        )
        found = {r["trace_id"]: r for r in rows}
        return found if len(found) == len(trace_ids) else None

    return wait_for(fetch, timeout=20)


def serve_judges(tmp: Path, packs: dict[str, str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-judge")
    return serve(tmp, packs, assembler=FAST, judges={"tick_seconds": 600})


def test_judgements_are_stored_with_their_cost(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve_judges(tmp_path, {"judges": judge_pack(judge_server.base_url)}, monkeypatch)
    try:
        good, bad = run(server, "GOOD: it arrives today"), run(server, "BAD: no idea")
        results = judged(server, [good, bad])
        assert (results[good]["verdict"], results[good]["score"]) == ("pass", 0.9)
        assert results[good]["label"] == "helpful"
        assert results[good]["requested_decision"] is None
        # No EvaluatorCard: the failure may ask for a review, never for its QUARANTINE.
        failed = results[bad]
        assert (failed["verdict"], failed["reason"]) == ("review", "judge_uncalibrated")
        assert failed["requested_decision"] == "REVIEW"
        assert "unhelpful" in failed["message"] and "QUARANTINE" in failed["message"]
        root = server.query("SELECT root_span_id FROM trajectories WHERE trace_id = ?", [bad])
        assert failed["evidence_span_ids"] == [root[0][0]]
        calls = server.query_dicts("SELECT * FROM judge_calls ORDER BY trace_id")
        assert {c["outcome"] for c in calls} == {"ok"} and len(calls) == 2
        for call in calls:  # 1000 tokens in at $0.5/M, 50 out at $2/M
            assert call["cost_usd"] == pytest.approx(0.0006)
            assert (call["input_tokens"], call["output_tokens"], call["model"]) == (
                1000,
                50,
                "judge-mini",
            )
        labels = {"pack": "support-judges", "rule": "helpful-answer", "model": "judge-mini"}
        assert server.metric("sextant_judge_cost_usd_total", labels) == pytest.approx(0.0012)
        assert server.metric("sextant_judge_calls_total", {**labels, "outcome": "ok"}) == 2
        sent = judge_server.requests[0]
        assert sent["authorization"] == "Bearer sk-test-judge"
        assert sent["model"] == "judge-mini"
        assert sent["response_format"]["type"] == "json_schema"
        prompt = judge_server.prompts()[0]
        assert "Where is my parcel?" in prompt
        assert 'lookup_customer {"customer":"C-1"} -> parcel P-7 left the depot' in prompt
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ("SLOW", "timeout"),
        ("MALFORMED", "malformed"),
        ("LIMITED", "rate_limited"),
        ("BROKEN", "provider_error"),
    ],
)
def test_a_judge_that_fails_reviews_the_run(
    tmp_path: Path,
    judge_server: ScriptedJudge,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    outcome: str,
) -> None:
    server = serve_judges(tmp_path, {"judges": judge_pack(judge_server.base_url)}, monkeypatch)
    try:
        trace_id = run(server, answer)
        result = judged(server, [trace_id])[trace_id]
        assert (result["verdict"], result["reason"]) == ("review", "judge_unavailable")
        assert result["requested_decision"] == "REVIEW"
        assert outcome in result["message"]
        labels = {"pack": "support-judges", "rule": "helpful-answer", "model": "judge-mini"}
        assert server.metric("sextant_judge_calls_total", {**labels, "outcome": outcome}) == 1
        assert server.metric("sextant_judge_cost_usd_total", labels) == 0
        # The run's other rule is judged as ever.
        presence = server.query(
            "SELECT verdict FROM results WHERE trace_id = ? AND rule_id = 'looks-the-customer-up'",
            [trace_id],
        )
        assert presence == [("pass",)]
    finally:
        server.stop()


def test_budgets_and_sampling_are_kept(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    sampling = (
        judge_pack(judge_server.base_url, rule="\n    sample: 0.5")
        .replace("name: support-judges", "name: sampled-judges")
        .replace("Grade the", "Judge the")  # its own prompt: no judgement shared by the cache
    )
    packs = {
        "budget": judge_pack(judge_server.base_url, calls_per_minute=2),
        "sampled": sampling,
    }
    server = serve_judges(tmp_path, packs, monkeypatch)
    try:
        runs = [run(server, f"GOOD {i}") for i in range(8)]
        # Trace ids are random: a ninth run (and more) until the sample keeps some and not all
        # (eight runs all on one side happen one time in 128).
        while not 0 < sum(sampled(t, 0.5) for t in runs) < len(runs):
            runs.append(run(server, f"GOOD {len(runs)}"))
        budget = judged(server, runs)
        made = [t for t in runs if budget[t]["verdict"] == "pass"]
        refused = [budget[t] for t in runs if t not in made]
        assert len(made) == 2
        assert {(r["verdict"], r["reason"]) for r in refused} == {("review", "judge_over_budget")}
        assert "calls_per_minute" in refused[0]["message"]
        chosen = [t for t in runs if sampled(t, 0.5)]
        labels = {"pack": "sampled-judges", "rule": "helpful-answer"}
        wait_for(
            lambda: (
                server.metric("sextant_judge_sampled_out_total", labels) == len(runs) - len(chosen)
            )
        )
        judged(server, chosen, pack="sampled-judges")
        rows = server.query(
            "SELECT trace_id FROM results WHERE pack = 'sampled-judges' AND rule_type = 'judge'"
        )
        assert sorted(r[0] for r in rows) == sorted(chosen)
        calls = server.query("SELECT count(*) FROM judge_calls WHERE outcome = 'ok'")[0][0]
        assert calls == 2 + len(chosen)
    finally:
        server.stop()


def test_a_hanging_judge_holds_up_nothing_else(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = start_judge()
    fast.release()  # its HOLD answers at once
    other = (
        judge_pack(fast.base_url)
        .replace("name: support-judges", "name: other-judges")
        .replace("Grade the", "Judge the")
    )
    pack = judge_pack(judge_server.base_url).replace("timeout: 1s", "timeout: 60s")
    server = serve_judges(tmp_path, {"judges": pack, "other": other}, monkeypatch)
    try:
        held = run(server, "GOOD HOLD")
        wait_for(lambda: judge_server.in_flight == 1)
        later = [run(server, f"GOOD {i}") for i in range(5)]
        # Ingest, assembly and the deterministic rules go on while the judge has not answered.
        for trace_id in [held, *later]:
            wait_for(
                lambda trace_id=trace_id: (
                    server.query(
                        "SELECT verdict FROM results WHERE trace_id = ? AND rule_type = 'presence'"
                        " AND pack = 'support-judges'",
                        [trace_id],
                    )
                    == [("pass",)]
                )
            )
        # So do the other pack's judge, and this judge's other calls: only the held run waits.
        others = judged(server, [held, *later], pack="other-judges")
        assert {r["verdict"] for r in others.values()} == {"pass"}
        assert {r["verdict"] for r in judged(server, later).values()} == {"pass"}
        assert judge_server.in_flight == 1
        assert server.query(
            "SELECT count(*) FROM results WHERE rule_type = 'judge' AND trace_id = ?"
            " AND pack = 'support-judges'",
            [held],
        ) == [(0,)]
        judge_server.release()
        assert judged(server, [held])[held]["verdict"] == "pass"
    finally:
        server.stop()
        fast.close()


def test_usd_per_hour_holds_for_calls_in_flight(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A call costs USD 0.0006 (1000 tokens in, 50 out) but may cost up to ~0.0013 (its prompt's
    # bytes in, max_tokens out): it is planned only if that much is left of the hour's 0.002.
    server = serve_judges(
        tmp_path, {"judges": judge_pack(judge_server.base_url, usd_per_hour=0.002)}, monkeypatch
    )
    try:
        runs = [run(server, f"GOOD {i}") for i in range(8)]
        results = judged(server, runs)
        spent = server.query("SELECT sum(cost_usd) FROM judge_calls WHERE outcome = 'ok'")[0][0]
        assert 0 < spent <= 0.002
        refused = [r for r in results.values() if r["verdict"] != "pass"]
        assert refused and {r["reason"] for r in refused} == {"judge_over_budget"}
        assert "usd_per_hour" in refused[0]["message"]
        labels = {"pack": "support-judges", "rule": "helpful-answer", "model": "judge-mini"}
        assert server.metric("sextant_judge_cost_usd_total", labels) == pytest.approx(spent)
    finally:
        server.stop()


def test_identical_prompts_in_flight_together_are_asked_once(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve_judges(tmp_path, {"judges": judge_pack(judge_server.base_url)}, monkeypatch)
    try:
        first = run(server, "BAD HOLD")
        wait_for(lambda: judge_server.in_flight == 1)
        twins = [run(server, "GOOD HOLD TWIN") for _ in range(3)]  # one prompt, three runs
        for trace_id in twins:
            wait_for(
                lambda trace_id=trace_id: server.query(
                    "SELECT 1 FROM results WHERE trace_id = ? AND rule_type = 'presence'",
                    [trace_id],
                )
            )
        judge_server.release()
        results = judged(server, [first, *twins])
        assert {results[t]["verdict"] for t in twins} == {"pass"}
        asked = [p for p in judge_server.prompts() if "GOOD HOLD TWIN" in p]
        assert len(asked) == 1
        outcomes = server.query(
            "SELECT outcome, count(*) FROM judge_calls WHERE trace_id IN ? GROUP BY 1", [twins]
        )
        assert sorted(outcomes) == [("cached", 2), ("ok", 1)]
    finally:
        server.stop()


SIMILARITY_PACK = """
name: support-answers
version: 1.0.0
owner: support-sre
selector: {service: support-desk}
rules:
  - id: answers-like-the-reference
    type: similarity
    min_similarity: 0.6
    reason: answer_drifted
    on_fail: REVIEW
    expected:
      parcel-7: "Your parcel P-7 left the depot and arrives today."
"""


def case_run(server: RunningServer, answer: str, case: str | None) -> str:
    """A run of a dataset case, named the way OpenInference names it (dataset.example.id)."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="support-desk"
    )
    script = AgentScript(provider.get_tracer("support"))
    attrs = {"dataset.example.id": case} if case else {}
    with script.agent("support-agent", "Where is my parcel?", answer, **attrs) as root:
        script.tool("lookup_customer", {"customer": "C-1"}, "parcel P-7 left the depot")
    provider.shutdown()
    return trace_id_of(root)


def test_similarity_compares_answers_with_the_packaged_model_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(
        tmp_path, {"answers": SIMILARITY_PACK}, assembler=FAST, judges={"tick_seconds": 600}
    )
    try:
        close = case_run(server, "The parcel P-7 is on its way and arrives today.", "parcel-7")
        far = case_run(server, "Please reset your password from the login page.", "parcel-7")
        other = case_run(server, "Anything.", None)
        results = judged(server, [close, far], pack="support-answers")
        assert results[close]["verdict"] == "pass" and results[close]["score"] > 0.6
        assert (results[far]["verdict"], results[far]["reason"]) == ("fail", "answer_drifted")
        assert results[far]["score"] < 0.6 and results[far]["requested_decision"] == "REVIEW"
        assert "similarity" in results[far]["message"]
        assert results[close]["rule_type"] == "similarity"
        wait_for(lambda: server.query("SELECT 1 FROM trajectories WHERE trace_id = ?", [other]))
        assert server.query(
            "SELECT count(*) FROM results WHERE trace_id = ? AND rule_type = 'similarity'", [other]
        ) == [(0,)]  # no case, nothing to compare

        # `rules test` compares a case's answer with its `expect.answer`, offline.
        cases = tmp_path / "cases.jsonl"
        code, printed = sextant(
            capsys, "export", "case", far, "--pack", "support-answers", "--out", str(cases),
            "--url", server.admin_url,
        )  # fmt: skip
        assert code == 0, printed
        case = json.loads(cases.read_text())
        assert case["expect"]["rules"]["answers-like-the-reference"] == "fail"
        assert case["expect"]["answer"] == "Please reset your password from the login page."
        pack_file = tmp_path / "rules" / "answers.yaml"
        code, printed = sextant(capsys, "rules", "test", str(pack_file), "--cases", str(cases))
        assert code == 1 and "answers-like-the-reference: pass, expected fail" in printed
        case["expect"]["answer"] = "Your parcel P-7 left the depot and arrives today."
        cases.write_text(json.dumps(case) + "\n")
        code, printed = sextant(capsys, "rules", "test", str(pack_file), "--cases", str(cases))
        assert code == 0 and "1 of 1 cases as expected" in printed, printed
    finally:
        server.stop()


def test_runs_beyond_one_look_are_each_judged_once(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-judge")
    pack = judge_pack(judge_server.base_url)
    # Two runs per look: runs closed in one assembly round share their close time, so the
    # looks page through them by (close time, trace id).
    server = serve(
        tmp_path, {"judges": pack}, assembler=FAST, judges={"tick_seconds": 600, "batch": 2}
    )
    try:
        runs = [run(server, f"GOOD {i}") for i in range(7)]
        judged(server, runs)
        per_run = server.query(
            "SELECT trace_id, count(*) FROM results WHERE rule_type = 'judge' GROUP BY 1"
        )
        assert sorted(per_run) == sorted((t, 1) for t in runs)
        assert server.query("SELECT count(*) FROM judge_calls") == [(7,)]
        # set once the look that stored the last result has moved its cursor on
        wait_for(lambda: server.metric("sextant_judge_lag_seconds") == 0)
    finally:
        server.stop()


SECRET_KEY = "judge-secret-7f3a9c1d"  # no well-known shape: only its value can find it


@pytest.mark.parametrize("answer", ["ECHO", "LEAK"])
def test_a_judge_error_that_quotes_the_key_is_stored_and_shown_without_it(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET_KEY)
    pack = judge_pack(judge_server.base_url)
    server = serve(tmp_path, {"judges": pack}, assembler=FAST, judges={"tick_seconds": 600})
    try:
        trace_id = run(server, answer)
        result = judged(server, [trace_id])[trace_id]
        assert judge_server.requests[0]["authorization"] == f"Bearer {SECRET_KEY}"
        assert (result["verdict"], result["reason"]) == ("review", "judge_unavailable")
        (error,) = server.query("SELECT error FROM judge_calls WHERE trace_id = ?", [trace_id])[0]
        assert "HTTP 500" in error if answer == "ECHO" else "HTTP 401" in error
        assert "[REDACTED]" in error and "[REDACTED]" in result["message"]
        assert SECRET_KEY[:8] not in error and SECRET_KEY[:8] not in result["message"]
        with urllib.request.urlopen(f"{server.admin_url}/trajectories/{trace_id}") as reply:
            shown = reply.read().decode()
        assert "judge_unavailable" in shown and "[REDACTED]" in shown
        assert SECRET_KEY[:8] not in shown
    finally:
        server.stop()


def test_a_judge_redirected_to_another_origin_is_not_followed(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = start_judge()
    judge_server.redirect_to = elsewhere.base_url.replace("127.0.0.1", "localhost")
    server = serve_judges(tmp_path, {"judges": judge_pack(judge_server.base_url)}, monkeypatch)
    try:
        trace_id = run(server, "GOOD ELSEWHERE")
        result = judged(server, [trace_id])[trace_id]
        assert (result["verdict"], result["reason"]) == ("review", "judge_unavailable")
        assert "another origin" in result["message"] and "localhost" in result["message"]
        assert elsewhere.requests == []
        assert server.query("SELECT outcome FROM judge_calls") == [("provider_error",)]
    finally:
        server.stop()
        elsewhere.close()
