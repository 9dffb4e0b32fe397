"""`sextant demo`: a collector on loopback, simulated agents exporting real OTLP, live verdicts
and decisions in the terminal, then a summary and where the DuckDB file is.

The agents are ordinary OpenTelemetry SDK programs; nothing here reaches inside the collector
except to read its store the way `sextant sql` would.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from collector.config import BUILTIN_RULES
from collector.demo.agents import AgentScript, provider_for
from collector.embedded import Embedded, loopback_config, start

CANARY_PACK = Path(__file__).resolve().parent.parent / "data" / "demo-canary.yaml"
CANARY_MIN_RUNS = 10  # the canary pack's min_samples: fewer runs a side would only be a review


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
        script.chat([("request_approval", {"change": "email"})])
        script.tool(
            "request_approval",
            {"change": "email"},
            "approved",
            **{"sextant.approval.status": "approved", "enduser.id": user},
        )
        script.chat([("update_account", {"customer": user})])
        script.tool("update_account", {"customer": user, "email": "new"}, **{"enduser.id": user})
        script.chat()
    return r


def unsafe_support(script: AgentScript, i: int) -> Any:
    user = f"customer-{i}"
    with script.agent("support-agent", "Change my e-mail", "Done.", **{"enduser.id": user}) as r:
        script.chat([("lookup_customer", {"email": f"{user}@example.com"})])
        script.tool("lookup_customer", {"email": f"{user}@example.com"}, **{"enduser.id": user})
        script.chat([("update_account", {"customer": user})])  # no approval asked
        script.tool("update_account", {"customer": user, "email": "new"}, **{"enduser.id": user})
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


VERDICT_COUNTS = """
SELECT service_name, agent_name, service_version, coalesce(verdict, 'none'), count(*)
FROM trajectories WHERE is_current GROUP BY ALL
"""


class Demo:
    def __init__(self, out: TextIO, runs: int, data_dir: Path | None) -> None:
        self.out = out
        self.runs = runs
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="sextant-demo-"))
        self.seen_trajectories: set[str] = set()
        self.seen_decisions: set[tuple[str, int]] = set()

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def run(self, timeout: float = 90.0) -> int:
        config = loopback_config(
            storage={"data_dir": str(self.data_dir)},
            workers={"processes": 0},
            assembler={"quiet_period_seconds": 1.0, "max_trace_age_seconds": 20.0},
            rules={"paths": [str(BUILTIN_RULES), str(CANARY_PACK)]},
            decisions={"interval_seconds": 0.5, "window_seconds": 600},
            log_level="WARNING",
        )
        self.say("Sextant demo: a collector on loopback ports with a temporary store")
        server = start(config)
        try:
            self.say(f"  OTLP/gRPC {server.grpc_endpoint}   admin {server.admin_url}")
            self.say(f"  store     {server.pipeline.database.path}")
            self.say()
            return self._drive(server, timeout)
        finally:
            server.stop()
            self.say()
            self.say(f"DuckDB file: {self.data_dir / 'sextant.duckdb'}")
            self.say(f"  sextant show --db {self.data_dir / 'sextant.duckdb'} --latest")

    def _drive(self, server: Embedded, timeout: float) -> int:
        expected_runs = sum(a.runs(self.runs) for a in AGENTS)
        self.say(f"Simulated agents export {expected_runs} runs over OTLP/gRPC:")
        for a in AGENTS:
            self.say(f"  - {a.title:<36} {a.service}/{a.agent}@{a.version}  x{a.runs(self.runs)}")
        self.say()
        for i in range(max(a.runs(self.runs) for a in AGENTS)):
            for a in (a for a in AGENTS if i < a.runs(self.runs)):
                provider = provider_for(
                    OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True),
                    service=a.service,
                    version=a.version,
                )
                a.run(AgentScript(provider.get_tracer(a.agent)), i)
                provider.shutdown()
            self._show_progress(server)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._show_progress(server)
            if len(self.seen_trajectories) >= expected_runs and self._as_expected(server):
                break
            time.sleep(0.3)
        self._show_progress(server)
        return self._summary(server)

    def _show_progress(self, server: Embedded) -> None:
        cursor = server.pipeline.database.cursor()
        try:
            for row in cursor.execute(TRAJECTORIES).fetchall():
                trace_id, service, agent, version, steps, verdict, reasons, _ = row
                if trace_id in self.seen_trajectories:
                    continue
                self.seen_trajectories.add(trace_id)
                why = f"  ({', '.join(reasons)})" if reasons else ""
                target = f"{service}/{agent}@{version}"
                self.say(
                    f"  closed  {trace_id[:12]}  {target:<38} {steps:>2} steps"
                    f"  {(verdict or 'none').upper()}{why}"
                )
            rows = cursor.execute(
                "SELECT decision_id, seq, event, decision, service_name, agent_name,"
                " service_version, reasons, evidence_trace_ids FROM decisions"
                " ORDER BY changed_at, seq"
            ).fetchall()
            for decision_id, seq, event, decision, service, agent, version, reasons, ev in rows:
                if (decision_id, seq) in self.seen_decisions:
                    continue
                self.seen_decisions.add((decision_id, seq))
                evidence = f"  evidence {ev[0][:12]}" if ev else ""
                self.say(
                    f"  {event.upper():<7} {decision:<10} {service}/{agent}@{version}"
                    f"  {', '.join(reasons or [])}{evidence}"
                )
        finally:
            cursor.close()

    def targets(self, server: Embedded) -> dict[tuple[str, str, str], dict[str, Any]]:
        snap = server.pipeline.decisions.snapshot()
        found = {}
        for target in snap.targets:
            decision, reasons = snap.decision_of(target)
            key = (target.service, target.agent, target.version)
            found[key] = {"decision": decision.value, "reasons": reasons}
        return found

    def _as_expected(self, server: Embedded) -> bool:
        targets = self.targets(server)
        return all(
            targets.get((a.service, a.agent, a.version), {}).get("decision") == a.expect
            for a in AGENTS
        )

    def _summary(self, server: Embedded) -> int:
        targets = self.targets(server)
        cursor = server.pipeline.database.cursor()
        try:
            rows = cursor.execute(VERDICT_COUNTS).fetchall()
        finally:
            cursor.close()
        counts = {(s, a, v, verdict): n for s, a, v, verdict, n in rows}
        self.say()
        header = f"{'TARGET':<40} {'RUNS':>4} {'PASS':>4} {'FAIL':>4} {'REVIEW':>6}  DECISION"
        self.say(header)
        ok = True
        for a in AGENTS:
            key = (a.service, a.agent, a.version)
            got = targets.get(key, {"decision": "-", "reasons": []})
            n = {v: counts.get((*key, v), 0) for v in ("pass", "fail", "review", "none")}
            why = f" ({', '.join(got['reasons'])})" if got["reasons"] else ""
            self.say(
                f"{a.service + '/' + a.agent + '@' + a.version:<40} {sum(n.values()):>4}"
                f" {n['pass']:>4} {n['fail']:>4} {n['review']:>6}  {got['decision']}{why}"
            )
            ok &= got["decision"] == a.expect
        if not ok:
            self.say("\nsome targets did not reach the decision the demo expects (see above)")
        return 0 if ok else 1


def run_demo(out: TextIO, runs: int = 3, data_dir: Path | None = None) -> int:
    return Demo(out, runs, data_dir).run()
