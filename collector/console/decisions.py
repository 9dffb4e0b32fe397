"""The console's decision pages: a filtered list, one decision with its history, and the ack and
resolve forms, which go through the same engine methods as the API, then back (POST/redirect/GET).
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import duckdb
from aiohttp import web

from collector.console.access import CSRF, CSRF_FIELD, see_other
from collector.console.canary import has_canary, target_url
from collector.console.render import ago, page
from collector.datasets import recertify
from collector.datasets.recertify import NotRecertified, Recertifier
from collector.decisions.engine import DecisionEngine
from collector.decisions.history import DECISION_FILTERS, STATES, decision_history, list_decisions
from collector.decisions.state import DecisionState, Event, State
from collector.errors import SextantError
from collector.replay.evidence import write_evidence
from collector.store.database import Database
from collector.store.queries import jsonable, rows_as_dicts
from collector.store.runs import DuckDBSource
from collector.targets import Target
from evaluators.base import Decision

MAX_ROWS = 200
TARGET_COLUMNS = ("service_name", "agent_name", "service_version")
# the runs a decision cites, as the evidence table shows them: one query for all of them
EVIDENCE = """
SELECT trace_id, service_name, agent_name, service_version, verdict, verdict_rules, status,
       start_time, closed_at, input,
       (SELECT list(r.pack || '/' || r.rule_id || ': ' || r.verdict || ' by ' || r.reviewer
                    ORDER BY r.evaluated_at)
        FROM results r WHERE r.source = 'human' AND r.origin = 'live'
          AND r.trace_id = t.trace_id AND r.revision = t.revision) AS labels
FROM trajectories t WHERE is_current AND trace_id IN ?
"""


@dataclass(frozen=True)
class Stage:
    """One step of the timeline: pending → firing → acked → resolved."""

    name: str
    at: datetime | None
    detail: str = ""


def moment(value: str | None) -> datetime | None:
    """A time as the history rows hold it (ISO with Z) back as naive UTC."""
    return datetime.fromisoformat(value.removesuffix("Z")) if value else None


def timeline(history: list[dict[str, Any]]) -> list[Stage]:
    current = history[-1]
    pending = next((r for r in history if r["event"] == Event.PENDING), None)
    acks = [r for r in history if r["event"] == Event.ACK]
    ended = next((r for r in history if r["state"] == State.RESOLVED), None)
    if ended is None:
        how = ""
    elif ended["event"] == Event.RESOLVE:
        how = f"by {ended['actor']}"
    else:
        how = "its condition cleared"
    return [
        Stage(
            "pending",
            moment(pending["changed_at"]) if pending else None,
            "" if pending else "no wait: it fired at once",
        ),
        Stage("firing", moment(current["fired_at"]), "" if current["fired_at"] else "never fired"),
        Stage(
            "acked",
            moment(acks[-1]["changed_at"]) if acks else None,
            f"by {acks[-1]['actor']}" if acks else "",
        ),
        Stage("resolved", moment(current["resolved_at"]), how),
    ]


class DecisionPages:
    """GET /decisions, GET /decisions/{id}, POST /decisions/{id}/ack and /resolve."""

    def __init__(
        self,
        engine: DecisionEngine,
        database: Database,
        now: Callable[[], datetime],
        recertifier: Recertifier,
    ) -> None:
        self.engine = engine
        self.recertifier = recertifier
        self.database = database
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/decisions", self._list)
        app.router.add_get("/decisions/{id}", self._one)
        app.router.add_post("/decisions/{id}/ack", self._ack)
        app.router.add_post("/decisions/{id}/resolve", self._resolve)
        app.router.add_get("/decisions/{id}/evidence.zip", self._evidence)

    async def _evidence(self, request: web.Request) -> web.Response:
        """The decision's evidence bundle, as `sextant evidence ID` writes it."""
        decision_id = request.match_info["id"]
        try:
            body = await asyncio.to_thread(self.database.read, bundle_zip, decision_id, self.now())
        except SextantError as exc:
            raise web.HTTPNotFound(text=str(exc)) from exc
        name = f"evidence-{decision_id}.zip"
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        return web.Response(body=body, content_type="application/zip", headers=headers)

    async def _list(self, request: web.Request) -> web.Response:
        asked = {k: request.query.get(k, "").strip() for k in (*DECISION_FILTERS, "state")}
        if asked["state"] not in ("", *STATES):
            asked["state"] = ""
        filters = {k: v for k, v in asked.items() if v}
        found = await asyncio.to_thread(self.database.read, list_decisions, filters, MAX_ROWS)
        for row in found:
            row["changed"] = moment(row["changed_at"])
        return page(
            "decisions.html",
            nav="decisions",
            rows=found,
            asked=asked,
            states=STATES,
            max_rows=MAX_ROWS,
            now=self.now(),
            ago=ago,
        )

    async def _one(self, request: web.Request) -> web.Response:
        return await self._show(request, request.match_info["id"])

    async def _show(
        self, request: web.Request, decision_id: str, status: int = 200, error: str = ""
    ) -> web.Response:
        history, evidence = await asyncio.to_thread(self.database.read, with_evidence, decision_id)
        if not history:
            return page("decision_missing.html", 404, nav="decisions", decision_id=decision_id)
        for row in history:
            row["changed"] = moment(row["changed_at"])
        current = history[-1]
        target = Target(*(current[k] or "" for k in TARGET_COLUMNS))
        rules = list(current["rules"] or [])
        canary = rules and not target.is_scope()
        if canary:
            canary = await asyncio.to_thread(self.database.read, has_canary, target, rules)
        return page(
            "decision.html",
            status=status,
            nav="decisions",
            d=current,
            evidence=evidence,
            history=history,
            stages=timeline(history),
            notes=[r for r in history if r["event"] in (Event.ACK, Event.RESOLVE, Event.RECERTIFY)],
            recertify=Decision(current["decision"]) in self.recertifier.required,
            target_query=target_query(current),
            canary_url=target_url(target) + "#canary" if canary else None,
            active=current["state"] != State.RESOLVED,
            csrf=request[CSRF],
            csrf_field=CSRF_FIELD,
            error=error,
            now=self.now(),
            ago=ago,
        )

    async def _ack(self, request: web.Request) -> web.Response:
        return await self._by_person(request, self.engine.acknowledge)

    async def _resolve(self, request: web.Request) -> web.Response:
        """Resolve, after a clean recertification where one is needed; a refused one shows
        which cases still fail."""
        dataset = (await request.post()).get("dataset")
        named = dataset.strip() if isinstance(dataset, str) and dataset.strip() else None

        def action(decision_id: str, by: str, note: str) -> DecisionState:
            return recertify.resolve(self.engine, self.recertifier, decision_id, by, note, named)

        try:
            return await self._by_person(request, action)
        except NotRecertified as exc:
            return await self._show(request, request.match_info["id"], 409, str(exc))
        except SextantError as exc:
            return await self._show(request, request.match_info["id"], 400, f"Not resolved: {exc}")

    async def _by_person(
        self, request: web.Request, action: Callable[[str, str, str], DecisionState]
    ) -> web.Response:
        decision_id = request.match_info["id"]
        form = await request.post()
        by, note = form.get("by"), form.get("note") or ""
        if not isinstance(by, str) or not by.strip() or not isinstance(note, str):
            return await self._show(request, decision_id, 400, "Say who acts (the “by” field).")
        try:
            await asyncio.to_thread(action, decision_id, by.strip(), note)
        except LookupError:
            message = "This decision is no longer pending or firing: nothing to do."
            return await self._show(request, decision_id, 409, message)
        return see_other(f"/decisions/{quote(decision_id, safe='')}")


def with_evidence(
    cursor: duckdb.DuckDBPyConnection, decision_id: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The decision's history and, for each run its latest state cites (newest first), the run's
    target, verdict, failing rules, reviewers' labels and time; a run retention deleted is
    named alone."""
    history = decision_history(cursor, decision_id)
    if not history:
        return history, []
    cited = history[-1]["evidence_trace_ids"] or []
    cursor.execute(EVIDENCE, [cited])
    runs = {row["trace_id"]: jsonable(row) for row in rows_as_dicts(cursor)}
    return history, [runs.get(t, {"trace_id": t}) for t in cited]


def target_query(row: dict[str, Any]) -> str:
    """The list page's query for this decision's target."""
    parts = {
        "service": row["service_name"],
        "agent": row["agent_name"],
        "version": row["service_version"],
    }
    return "&".join(f"{k}={quote(v or '', safe='')}" for k, v in parts.items())


def bundle_zip(cursor: duckdb.DuckDBPyConnection, decision_id: str, now: datetime) -> bytes:
    out = io.BytesIO()
    write_evidence(DuckDBSource(cursor, "the collector's store"), decision_id, out, now)
    return out.getvalue()
