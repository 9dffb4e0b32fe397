"""SIGKILL while exporters are sending: every span acknowledged before the kill is stored after
the restart (some only in the ingest journal at the kill, loaded at the start), every
acknowledged trace is assembled into its trajectory and evaluated once, and every acknowledged
run of a conversation is a turn of its session."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import requests

from tests.support.otlp import (
    TRACE_EXPORT,
    new_span_id,
    new_trace_id,
    simple_spans,
    trace_request,
)
from tests.support.paths import ROOT
from tests.support.process import EPHEMERAL, Serve
from tests.support.wait import eventually, wait_for

EXPORTERS = 8
SPANS_PER_TRACE = 10


def send_until(port: int, stop: threading.Event, acked: list[bytes]) -> None:
    """Whole 10-span traces, one request each, until `stop`; the ids of those acknowledged."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(TRACE_EXPORT)
        while not stop.is_set():
            trace_id = new_trace_id()
            body = trace_request(simple_spans(SPANS_PER_TRACE, trace_id)).SerializeToString()
            try:
                export(body, timeout=5)
            except grpc.RpcError:
                continue  # refused, or the server is gone: not acknowledged
            acked.append(trace_id)


def test_acknowledged_spans_survive_a_kill_under_load_and_are_assembled(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "d")]
    slow = {"SEXTANT_ASSEMBLER__QUIET_PERIOD_SECONDS": "30"}  # many traces open at the kill
    serve = Serve([*EPHEMERAL, *data], tmp_path, env=slow)
    stop = threading.Event()
    acked: list[list[bytes]] = [[] for _ in range(EXPORTERS)]
    senders = [
        threading.Thread(target=send_until, args=(serve.ports["OTLP/gRPC"], stop, mine))
        for mine in acked
    ]
    for sender in senders:
        sender.start()
    wait_for(lambda: sum(map(len, acked)) >= 200, timeout=60)
    serve.proc.kill()  # SIGKILL mid-load: no drain, no final checkpoint
    serve.proc.wait(30)
    stop.set()
    for sender in senders:
        sender.join(30)
    acknowledged = {trace_id.hex() for mine in acked for trace_id in mine}

    fast = {
        "SEXTANT_ASSEMBLER__QUIET_PERIOD_SECONDS": "0.3",
        "SEXTANT_ASSEMBLER__TICK_SECONDS": "0.05",
    }
    again = Serve([*EPHEMERAL, *data], tmp_path, env=fast)
    sql = f"http://127.0.0.1:{again.ports['admin']}/api/v1/sql"

    def rows(query: str) -> list[list[object]]:
        reply = requests.post(sql, json={"sql": query, "max_rows": 100_000}, timeout=30)
        reply.raise_for_status()
        return reply.json()["rows"]

    def unassembled() -> set[str]:
        query = "SELECT DISTINCT trace_id FROM trajectories WHERE is_current"
        return acknowledged - {row[0] for row in rows(query)}

    try:
        counts = dict(rows("SELECT trace_id, count(*) FROM spans GROUP BY trace_id"))
        assert {t for t in acknowledged if counts.get(t) != SPANS_PER_TRACE} == set()
        wait_for(lambda: not unassembled(), timeout=60)
    finally:
        assert again.stop() == 0


# Conversations whose runs all come before the kill, both before and after it, after it only.
BEFORE = [f"conv-before-{i}" for i in range(6)]
ACROSS = [f"conv-across-{i}" for i in range(6)]
AFTER = [f"conv-after-{i}" for i in range(4)]
SERVICE = "support-desk"
# The shipped packs, and the shipped example of session rules (its selector takes SERVICE).
PACKS = ["--rules", str(ROOT / "rules"), "--rules", str(ROOT / "rules/examples/sessions.yaml")]
RUNS_AFTER_RESTART = 10  # per exporter


def agent_run(trace_id: bytes, conversation: str) -> list[dict[str, Any]]:
    """A 10-span support-agent run as the OTel GenAI instrumentations emit it: an
    `invoke_agent` root over model calls and tool calls, `gen_ai.conversation.id` on each."""
    start = time.time_ns() - 2_000_000_000
    common = {"gen_ai.conversation.id": conversation, "gen_ai.provider.name": "openai"}
    root = new_span_id()
    spans: list[dict[str, Any]] = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "name": "invoke_agent support-agent",
            "start": start,
            "end": start + 1_900_000_000,
            "attributes": {
                **common,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support-agent",
            },
        }
    ]
    for i in range(SPANS_PER_TRACE - 1):
        at = start + (i + 1) * 150_000_000
        if i % 2 == 0:
            name, attributes = (
                "chat gpt-4o-mini",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 120,
                    "gen_ai.usage.output_tokens": 30,
                },
            )
            kind = 3  # CLIENT
        else:
            name, attributes = (
                "execute_tool lookup_order",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "lookup_order",
                    "gen_ai.tool.call.id": f"call_{i}",
                },
            )
            kind = 1  # INTERNAL
        spans.append(
            {
                "trace_id": trace_id,
                "span_id": new_span_id(),
                "parent_span_id": root,
                "name": name,
                "kind": kind,
                "start": at,
                "end": at + 100_000_000,
                "attributes": {**common, **attributes},
            }
        )
    return spans


@dataclass
class Sent:
    """The runs sent, by conversation: acknowledged, and in doubt (the export failed, so the
    client cannot know whether the server had it on disk before it died)."""

    conversations: list[str]
    acked: dict[str, str] = field(default_factory=dict)  # trace id (hex) -> conversation
    in_doubt: dict[str, str] = field(default_factory=dict)
    _next: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def conversation(self) -> str:
        with self._lock:
            return self.conversations[next(self._next) % len(self.conversations)]

    def send(self, port: int, stop: threading.Event | None = None, count: int = 0) -> None:
        """Runs, one request each, until `stop` is set (or `count` of them have been sent)."""
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary(TRACE_EXPORT)
            sent = 0
            while (not stop.is_set()) if stop is not None else sent < count:
                sent += 1
                trace_id, conversation = new_trace_id(), self.conversation()
                request = trace_request(
                    agent_run(trace_id, conversation), {"service.name": SERVICE}
                )
                try:
                    export(request.SerializeToString(), timeout=10)
                except grpc.RpcError:
                    with self._lock:
                        self.in_doubt[trace_id.hex()] = conversation
                    continue
                with self._lock:
                    self.acked[trace_id.hex()] = conversation


def sent_by(
    serve: Serve, sent: Sent, stop: threading.Event | None, count: int = 0
) -> list[threading.Thread]:
    """EXPORTERS clients sending runs to `serve`, each on its own channel, started."""
    port = serve.ports["OTLP/gRPC"]
    senders = [
        threading.Thread(target=sent.send, args=(port, stop, count)) for _ in range(EXPORTERS)
    ]
    for sender in senders:
        sender.start()
    return senders


def export(port: int, spans: list[dict[str, Any]]) -> None:
    """One request, acknowledged (or the test fails)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        request = trace_request(spans, {"service.name": SERVICE})
        channel.unary_unary(TRACE_EXPORT)(request.SerializeToString(), timeout=10)


@dataclass
class Split:
    """Runs sent in two requests, one before the kill and one after the restart."""

    before: list[list[dict[str, Any]]]
    after: list[list[dict[str, Any]]]
    conversation: dict[str, str]  # trace id (hex) -> conversation

    @classmethod
    def of(cls, count: int, first: slice, conversations: list[str]) -> Split:
        runs = {new_trace_id(): conversations[i % len(conversations)] for i in range(count)}
        spans = [agent_run(trace_id, c) for trace_id, c in runs.items()]
        rest = [[s for s in run if s not in run[first]] for run in spans]
        return cls([run[first] for run in spans], rest, {t.hex(): c for t, c in runs.items()})


def test_sessions_and_results_span_a_kill_under_load_each_run_evaluated_once(
    tmp_path: Path,
) -> None:
    """Runs of 16 conversations from 8 exporters under the shipped rule packs and session
    rules; SIGKILL once many
    runs are assembled, evaluated and grouped into sessions and the latest are still open;
    restart and send more runs of some of those conversations and of new ones, and the rest of
    runs whose first spans came before the kill. Every acknowledged run is stored whole, is
    assembled and evaluated once (a run whose root was there before the kill and whose last
    spans came after it twice: once per revision), and is a turn of its session, listed once."""
    data = ["--data-dir", str(tmp_path / "d"), *PACKS]
    quick = {
        "SEXTANT_ASSEMBLER__QUIET_PERIOD_SECONDS": "0.5",
        "SEXTANT_ASSEMBLER__TICK_SECONDS": "0.05",
        "SEXTANT_SESSIONS__TICK_SECONDS": "0.1",
    }
    # Root and first spans before the kill, closed and evaluated then; the last spans after.
    closed = Split.of(4, slice(0, 5), ACROSS)
    # Children before the kill (open, waiting for their root); the root comes after.
    rootless = Split.of(4, slice(1, 6), ACROSS)
    serve = Serve([*EPHEMERAL, *data], tmp_path, env=quick)
    for run in closed.before + rootless.before:
        export(serve.ports["OTLP/gRPC"], run)
    before = Sent(BEFORE + ACROSS)
    stop = threading.Event()
    senders = sent_by(serve, before, stop)
    first_sql = f"http://127.0.0.1:{serve.ports['admin']}/api/v1/sql"

    def evaluated_and_grouped() -> bool:
        """Whether many runs are evaluated (the first halves of `closed` among them) and each
        conversation so far has its session."""
        query = (
            "SELECT (SELECT count(DISTINCT trace_id) FROM results WHERE origin = 'live'),"
            " (SELECT count(*) FROM sessions),"
            " (SELECT count(*) FROM trajectories WHERE trace_id IN ?)"
        )
        try:
            (found,) = rows(first_sql, query, [list(closed.conversation)])
        except requests.RequestException:
            return False
        runs, sessions, first_halves = map(int, found)
        return (
            runs >= 150
            and first_halves == len(closed.conversation)
            and sessions == len(before.conversations)
        )

    try:
        wait_for(evaluated_and_grouped, timeout=60, interval=0.1)
    finally:
        serve.proc.kill()  # SIGKILL mid-load: no drain, no final checkpoint
        serve.proc.wait(30)
        stop.set()
        for sender in senders:
            sender.join(30)
    killed_at = datetime.now(UTC).replace(tzinfo=None)  # the store's times are naive UTC

    again = Serve([*EPHEMERAL, *data], tmp_path, env=quick)
    after = Sent(ACROSS + AFTER)
    sql = f"http://127.0.0.1:{again.ports['admin']}/api/v1/sql"
    sessions_url = f"http://127.0.0.1:{again.ports['admin']}/api/v1/sessions"
    try:
        for run in closed.after + rootless.after:
            export(again.ports["OTLP/gRPC"], run)
        for sender in sent_by(again, after, None, RUNS_AFTER_RESTART):
            sender.join(60)
        assert after.in_doubt == {}  # nothing is refused once the server runs again
        acked = before.acked | after.acked | closed.conversation | rootless.conversation
        assert set(before.acked.values()) >= set(ACROSS)  # sessions span the kill

        def sessions() -> dict[str, dict[str, Any]]:
            reply = requests.get(
                sessions_url, params={"service": SERVICE, "limit": "1000"}, timeout=30
            )
            reply.raise_for_status()
            return {s["session_id"]: s for s in reply.json()["sessions"]}

        def settled() -> dict[str, tuple[int, int, int]]:
            """Each acknowledged run is assembled whole and is in its conversation's session
            (checked until the stages have caught up; at the deadline, what is missing).
            Returns each run's trajectories: (rows, current rows, latest revision)."""
            built = rows(
                sql,
                "SELECT trace_id, count(*), count(*) FILTER (WHERE is_current), max(revision),"
                " max(span_count) FILTER (WHERE is_current) FROM trajectories GROUP BY trace_id",
            )
            whole = {t: (n, current, rev) for t, n, current, rev, spans in built if spans == 10}
            assert {t for t in acked if t not in whole} == set()
            found = sessions()
            missing = {
                trace_id: conversation
                for trace_id, conversation in acked.items()
                if trace_id not in (found.get(conversation, {}).get("trace_ids") or ())
            }
            assert missing == {}
            return whole

        trajectories = eventually(settled, timeout=60, interval=0.1)
        # Some runs acknowledged before the kill were still open then: assembled after it.
        late = rows(
            sql,
            "SELECT count(*) FROM trajectories WHERE revision = 1 AND closed_at > ?"
            " AND trace_id IN ?",
            [killed_at.isoformat(), list(before.acked)],
        )
        assert late[0][0] > 0

        # Stored >= acknowledged: each acknowledged run's spans, all of them.
        counts = dict(rows(sql, "SELECT trace_id, count(*) FROM spans GROUP BY trace_id"))
        assert {t for t in acked if counts.get(t) != SPANS_PER_TRACE} == set()
        stored_in_doubt = {t: c for t, c in before.in_doubt.items() if t in counts}

        # Assembled once: one trajectory each, current; a run whose last spans came after its
        # first revision was closed has two (one per revision), the second current.
        once = {t: trajectories[t] for t in acked if t not in closed.conversation}
        assert {t: built for t, built in once.items() if built != (1, 1, 1)} == {}
        assert {trajectories[t] for t in closed.conversation} == {(2, 1, 2)}

        # Evaluated once: no rule's live result stored twice for one revision of a run, and
        # each revision of every run (all alike) has the same rules' results.
        twice = rows(
            sql,
            "SELECT trace_id, revision, pack, rule_id, count(*) FROM results"
            " WHERE origin = 'live' AND scope = 'trajectory'"
            " GROUP BY ALL HAVING count(*) > 1",
        )
        assert twice == []
        rules = rows(
            sql,
            "SELECT trace_id, revision, list(pack || '/' || rule_id ORDER BY pack, rule_id)"
            " FROM results WHERE origin = 'live' AND scope = 'trajectory' GROUP BY ALL",
        )
        rules_of = {(t, revision): tuple(found) for t, revision, found in rules}
        judged = {
            rules_of.get((t, revision))
            for t, (_, _, latest) in trajectories.items()
            if t in acked
            for revision in range(1, latest + 1)
        }
        assert len(judged) == 1, judged
        alike = judged.pop()
        assert alike is not None
        assert {"default", "support-agent"} <= {r.split("/")[0] for r in alike}

        # A session rule's result is stored when it changes, once: never the same result
        # (verdict, reason, evidence, turn) twice in a row for one session's rule.
        repeated = rows(
            sql,
            "SELECT session_id, pack, rule_id, verdict, trace_id FROM ("
            "  SELECT *, lag(key) OVER (PARTITION BY session_id, pack, rule_id"
            "    ORDER BY evaluated_at) AS previous"
            "  FROM (SELECT *, (pack_version, verdict, reason, evidence_span_ids, trace_id,"
            "    revision) AS key FROM results WHERE scope = 'session' AND origin = 'live'))"
            " WHERE key IS NOT DISTINCT FROM previous",
        )
        assert repeated == []
        # ... and "in a row" is the order they were made: no two of a session's rule share an
        # instant (the runs read back at the restart and those handed meanwhile among them).
        tied = rows(
            sql,
            "SELECT session_id, pack, rule_id, evaluated_at, count(*) FROM results"
            " WHERE scope = 'session' AND origin = 'live' GROUP BY ALL HAVING count(*) > 1",
        )
        assert tied == []
        over = rows(
            sql,
            "SELECT DISTINCT session_id FROM results WHERE scope = 'session'"
            " AND rule_id = 'session-budget' AND verdict = 'fail'",
        )
        assert {row[0] for row in over} == set(BEFORE + ACROSS + AFTER)

        # No turn lost, none listed twice: each conversation's session holds its runs (and
        # those of the runs in doubt that the server had stored).
        runs: dict[str, set[str]] = {}
        for trace_id, conversation in (acked | stored_in_doubt).items():
            runs.setdefault(conversation, set()).add(trace_id)
        found = sessions()
        assert found.keys() == set(BEFORE + ACROSS + AFTER)
        for conversation, session in found.items():
            listed = session["trace_ids"]
            assert len(listed) == len(set(listed)), conversation
            assert set(listed) == runs[conversation], conversation
            assert session["turns"] == len(runs[conversation]), conversation
    finally:
        assert again.stop() == 0


def rows(url: str, query: str, params: list[Any] | None = None) -> list[list[Any]]:
    body = {"sql": query, "max_rows": 100_000, **({"params": params} if params else {})}
    reply = requests.post(url, json=body, timeout=30)
    reply.raise_for_status()
    return reply.json()["rows"]
