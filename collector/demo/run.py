"""The demo's scenario: a collector on loopback, simulated agents exporting real OTLP, and what
the store says about them; `collector/cli/demo.py` prints it.

The agents are ordinary OpenTelemetry SDK programs; nothing here reaches inside the collector
except to read its store the way `sextant sql` would.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from collector.config.sections import BUILTIN_RULES
from collector.demo.agents import AgentScript, provider_for
from collector.embedded import Embedded, loopback_config, start
from collector.targets import Target

CANARY_PACK = Path(__file__).resolve().parent.parent / "data" / "demo-canary.yaml"
CANARY_MIN_RUNS = 20  # the canary pack's min_samples (15) and a few blocks of both versions


@dataclass(frozen=True)
class SimulatedAgent:
    """One target (service × agent × version) and how each of its runs behaves."""

    title: str
    service: str
    agent: str
    version: str
    run: Callable[[AgentScript, int], Any]
    expect: str  # the decision the demo expects for this target
    min_runs: int = 1

    def runs(self, asked: int) -> int:
        return max(asked, self.min_runs)


def correct_support(script: AgentScript, i: int) -> Any:
    user = f"customer-{i}"
    with script.agent("support-agent", "Change my e-mail", "Done.", **{"enduser.id": user}) as r:
        script.chat([("lookup_customer", {"email": f"{user}@example.com"})])
        script.tool("lookup_customer", {"email": f"{user}@example.com"}, **{"enduser.id": user})
        asked = {"change": "email", "customer_id": user}
        script.chat([("request_approval", asked)])
        script.tool(
            "request_approval",
            asked,
            "approved",
            **{"sextant.approval.status": "approved", "enduser.id": user},
        )
        write = {"customer_id": user, "email": "new"}
        script.chat([("update_account", write)])
        script.tool("update_account", write, **{"enduser.id": user})
        script.chat()
    return r


def unsafe_support(script: AgentScript, i: int) -> Any:
    user = f"customer-{i}"
    with script.agent("support-agent", "Change my e-mail", "Done.", **{"enduser.id": user}) as r:
        script.chat([("lookup_customer", {"email": f"{user}@example.com"})])
        script.tool("lookup_customer", {"email": f"{user}@example.com"}, **{"enduser.id": user})
        write = {"customer_id": user, "email": "new"}
        script.chat([("update_account", write)])  # no approval asked
        script.tool("update_account", write, **{"enduser.id": user})
        script.chat()
    return r


def looping_travel(script: AgentScript, i: int) -> Any:
    with script.agent("travel-agent", "Find a flight LIS-OSL", "Still looking.") as r:
        for _ in range(6):
            script.chat([("search_flights", {"origin": "LIS", "destination": "OSL"})])
            script.tool("search_flights", {"origin": "LIS", "destination": "OSL"}, "[]")
        script.chat()
    return r


def triage(new_tool_mix: bool) -> Callable[[AgentScript, int], Any]:
    def run(script: AgentScript, i: int) -> Any:
        ticket = f"T-{1000 + i}"
        with script.agent("triage-agent", f"Triage {ticket}", "Routed.") as r:
            if not new_tool_mix:
                script.chat([("search_kb", {"query": "login fails"})])
                script.tool("search_kb", {"query": "login fails"}, '["KB-12"]')
            script.chat([("classify_ticket", {"ticket": ticket})])
            script.tool("classify_ticket", {"ticket": ticket}, "auth")
            if new_tool_mix:
                script.chat([("escalate_to_human", {"ticket": ticket})])
                script.tool("escalate_to_human", {"ticket": ticket}, "queued")
            script.chat()
        return r

    return run


AGENTS = [
    SimulatedAgent(
        "correct support agent", "support-desk", "support-agent", "2.3.0", correct_support, "PASS"
    ),
    SimulatedAgent(
        "support agent that skips approval",
        "support-desk",
        "support-agent",
        "2.4.0-rc1",
        unsafe_support,
        "QUARANTINE",
    ),
    SimulatedAgent(
        "looping travel agent", "travel-desk", "travel-agent", "1.0.0", looping_travel, "REVIEW"
    ),
    SimulatedAgent(
        "triage agent in production",
        "triage-desk",
        "triage-agent",
        "1.4.0",
        triage(new_tool_mix=False),
        "PASS",
        CANARY_MIN_RUNS,
    ),
    SimulatedAgent(
        "triage canary whose tool mix drifts",
        "triage-desk",
        "triage-agent",
        "1.5.0",
        triage(new_tool_mix=True),
        "ROLLBACK",
        CANARY_MIN_RUNS,
    ),
]

TRAJECTORIES = """
SELECT trace_id, service_name, agent_name, service_version, steps, verdict, verdict_reasons,
       closed_at
FROM trajectories WHERE is_current ORDER BY closed_at, trace_id
"""


DECISION_EVENTS = """
SELECT decision_id, seq, event, decision, service_name, agent_name, service_version, reasons,
       evidence_trace_ids
FROM decisions ORDER BY changed_at, seq
"""

VERDICT_COUNTS = """
SELECT service_name, agent_name, service_version, coalesce(verdict, 'none'), count(*)
FROM trajectories WHERE is_current GROUP BY ALL
"""


class DemoRun:
    """One demo: start the collector, send the agents' runs a round at a time, and read back
    what closed and what was decided since the last look."""

    def __init__(self, runs: int, data_dir: Path | None) -> None:
        self.runs = runs
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="sextant-demo-"))
        self.seen_trajectories: set[str] = set()
        self.seen_decisions: set[tuple[str, int]] = set()
        self.server: Embedded | None = None

    @property
    def db_path(self) -> Path:
        return self.data_dir / "sextant.duckdb"

    @property
    def expected_runs(self) -> int:
        return sum(a.runs(self.runs) for a in AGENTS)

    @property
    def rounds(self) -> int:
        return max(a.runs(self.runs) for a in AGENTS)

    def start(self) -> Embedded:
        config = loopback_config(
            storage={"data_dir": str(self.data_dir)},
            workers={"processes": 0},
            assembler={"quiet_period_seconds": 1.0, "max_trace_age_seconds": 20.0},
            rules={"paths": [str(BUILTIN_RULES), str(CANARY_PACK)]},
            decisions={"interval_seconds": 0.5, "window_seconds": 600},
            log_level="WARNING",
        )
        self.server = start(config)
        return self.server

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    @property
    def running(self) -> Embedded:
        """The collector `start` started; asking before is a programming error."""
        if self.server is None:
            raise RuntimeError("the demo's collector is not started")
        return self.server

    def send_round(self, i: int) -> None:
        """Run `i` of every agent that has that many runs, exported as an SDK would."""
        for a in (a for a in AGENTS if i < a.runs(self.runs)):
            provider = provider_for(
                OTLPSpanExporter(endpoint=self.running.grpc_endpoint, insecure=True),
                service=a.service,
                version=a.version,
            )
            a.run(AgentScript(provider.get_tracer(a.agent)), i)
            provider.shutdown()

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        cursor = self.running.pipeline.database.cursor()
        try:
            return cursor.execute(sql).fetchall()
        finally:
            cursor.close()

    def new_trajectories(self) -> list[tuple[Any, ...]]:
        """Trajectories closed since the last call."""
        fresh = [r for r in self.rows(TRAJECTORIES) if r[0] not in self.seen_trajectories]
        self.seen_trajectories.update(r[0] for r in fresh)
        return fresh

    def new_decision_events(self) -> list[tuple[Any, ...]]:
        """Decision events recorded since the last call."""
        fresh = [r for r in self.rows(DECISION_EVENTS) if (r[0], r[1]) not in self.seen_decisions]
        self.seen_decisions.update((r[0], r[1]) for r in fresh)
        return fresh

    def targets(self) -> dict[Target, dict[str, Any]]:
        snap = self.running.pipeline.decisions.snapshot()
        found = {}
        for target in snap.targets:
            decision, reasons = snap.decision_of(target)
            found[target] = {"decision": decision.value, "reasons": reasons}
        return found

    def done(self) -> bool:
        """Every run closed and every target at the decision the demo expects."""
        if len(self.seen_trajectories) < self.expected_runs:
            return False
        targets = self.targets()
        return all(
            targets.get(Target(a.service, a.agent, a.version), {}).get("decision") == a.expect
            for a in AGENTS
        )

    def summary(self) -> list[dict[str, Any]]:
        """Per target: runs by verdict, the decision reached and the one expected."""
        targets = self.targets()
        counts = {(s, a, v, verdict): n for s, a, v, verdict, n in self.rows(VERDICT_COUNTS)}
        rows = []
        for a in AGENTS:
            key = Target(a.service, a.agent, a.version)
            got = targets.get(key, {"decision": "-", "reasons": []})
            n = {v: counts.get((*key, v), 0) for v in ("pass", "fail", "review", "none")}
            rows.append(
                {
                    "target": f"{a.service}/{a.agent}@{a.version}",
                    "runs": sum(n.values()),
                    **{v: n[v] for v in ("pass", "fail", "review")},
                    "decision": got["decision"],
                    "reasons": got["reasons"],
                    "expected": a.expect,
                }
            )
        return rows
