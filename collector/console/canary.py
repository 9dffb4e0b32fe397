"""A target's page, with its canary against baseline: the latest look of each canary drift rule
at this version, per metric both sides' values, the effect size, the raw and the adjusted
p-value, the tools that appeared, vanished or shifted, and links to the runs of each side.

Everything shown of a canary is what the look stored (`results.details`, written when the rule
was evaluated): the page recomputes nothing, so it shows what the decision was based on. Below
it, each judge rule's failure rate on the target, raw and corrected by its EvaluatorCard
(collector/judges/rates.py), over every run of the version it judged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import duckdb
from aiohttp import web

from collector.console.render import ENVIRONMENT, ago, page
from collector.evaluation.packs import PackSource, compiled
from collector.judges.rates import Rate, judge_rates
from collector.store.database import Database
from collector.targets import Target

MAX_ROWS = 500  # metrics of the latest look of every canary rule of one target
# The latest look of each canary rule of the target, in one query.
LATEST = f"""
SELECT pack, rule_id, metric, verdict, reason, effect_size, p_value, baseline_n, current_n,
       window_start, window_end, baseline, details, evaluated_at
FROM results
WHERE scope = 'window' AND origin = 'live' AND rule_type = 'drift'
  AND coalesce(service_name, '') = ? AND coalesce(agent_name, '') = ?
  AND coalesce(service_version, '') = ?
  AND details IS NOT NULL AND json_extract_string(details, '$.mode') = 'canary'
QUALIFY evaluated_at = max(evaluated_at) OVER (PARTITION BY pack, rule_id)
ORDER BY pack, rule_id, metric
LIMIT {MAX_ROWS}
"""
# Whether any of a decision's rules judged its target as a canary (the decision page links).
ANY_CANARY = """
SELECT 1 FROM results
WHERE scope = 'window' AND origin = 'live' AND rule_type = 'drift'
  AND coalesce(service_name, '') = ? AND coalesce(agent_name, '') = ?
  AND coalesce(service_version, '') = ? AND pack || '/' || rule_id IN ?
  AND json_extract_string(details, '$.mode') = 'canary'
LIMIT 1
"""


@dataclass
class Look:
    """One canary rule's latest look at the target."""

    pack: str
    rule_id: str
    evaluated_at: datetime
    window_start: datetime
    window_end: datetime
    baseline: str
    baseline_versions: list[str]
    metrics: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool mix's tools, most moved first (what the tool_choice result stored)."""
        for m in self.metrics:
            if m["metric"] == "tool_choice":
                return list(m["details"].get("tools") or [])
        return []

    @property
    def verdict(self) -> str:
        verdicts = {m["verdict"] for m in self.metrics}
        return next((v for v in ("fail", "review", "pass") if v in verdicts), "pass")


def canary_looks(cursor: duckdb.DuckDBPyConnection, target: Target) -> list[Look]:
    cursor.execute(LATEST, list(target))
    looks: dict[tuple[str, str], Look] = {}
    for row in cursor.fetchall():
        pack, rule_id, metric, verdict, reason, effect, p_value, b_n, c_n = row[:9]
        start, end, baseline, details, at = row[9:]
        found = json.loads(details)
        look = looks.setdefault(
            (pack, rule_id),
            Look(pack, rule_id, at, start, end, baseline or "", found.get("baseline_versions", [])),
        )
        look.metrics.append(
            {
                "metric": metric,
                "verdict": verdict,
                "reason": reason,
                "effect_size": effect,
                "p_value": p_value,
                "baseline_n": b_n,
                "current_n": c_n,
                "details": found,
            }
        )
    return list(looks.values())


def has_canary(cursor: duckdb.DuckDBPyConnection, target: Target, rules: list[str]) -> bool:
    if not rules:
        return False
    return cursor.execute(ANY_CANARY, [*target, rules]).fetchone() is not None


def percent(value: float | None) -> str:
    """A share or a rate: '45.0 %'; '—' when the side had none."""
    return "—" if value is None else f"{value:.1%}".replace("%", " %")


def p_text(value: float | None) -> str:
    """A p-value to three significant digits: '0.0032', '1.7e-06'; '—' when not tested."""
    return "—" if value is None else f"{value:.3g}"


def number(value: float, unit: str) -> str:
    text = f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{text} {unit}" if unit else text


def side_value(value: Any, unit: str | None) -> str:
    """A side's value of a metric as stored: p50 and p95 for steps, latency, cost and tokens;
    a rate for error and pass rates; '—' when the side had no sample."""
    if value is None:
        return "—"
    if isinstance(value, dict):
        return f"p50 {number(value['p50'], unit or '')} · p95 {number(value['p95'], unit or '')}"
    return percent(float(value))


def runs_url(target: Target, version: str, start: datetime, end: datetime) -> str:
    """The trajectory list filtered to one side: the target at `version`, over the look's
    window to the second, outward (the list filters on when runs closed)."""
    service, agent, _ = target
    if end.microsecond:  # to the second, outward: the window's every run stays in
        end = end.replace(microsecond=0) + timedelta(seconds=1)
    form = {
        "target": f"{service}/{agent}/{version}",
        "since": start.replace(microsecond=0).isoformat() + "Z",
        "until": end.isoformat() + "Z",
    }
    return "/trajectories?" + urlencode(form)


def target_url(target: Target) -> str:
    service, agent, version = target
    return "/target?" + urlencode({"service": service, "agent": agent, "version": version})


# what target.html prints with
ENVIRONMENT.globals.update(percent=percent, p_text=p_text, side_value=side_value, runs_url=runs_url)


def target_judges(
    cursor: duckdb.DuckDBPyConnection, packs: PackSource, target: Target
) -> list[Rate]:
    """Each judge rule in force's failure rate on the target, over every run it judged."""
    compiled_packs = [compiled(text) for text in packs.snapshot()]
    return judge_rates(cursor, compiled_packs, datetime(1970, 1, 1), target=target)


class TargetPage:
    """GET /target?service=&agent=&version=: one target, with its canary against baseline and
    its judges' failure rates."""

    def __init__(self, database: Database, packs: PackSource, now: Callable[[], datetime]) -> None:
        self.database = database
        self.packs = packs
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_get("/target", self._one)

    async def _one(self, request: web.Request) -> web.Response:
        parts = [request.query.get(k, "") for k in ("service", "agent", "version")]
        if not parts[0]:
            raise web.HTTPBadRequest(text="service is required (and agent, version)")
        target = Target(*parts)
        looks = await asyncio.to_thread(self.database.read, canary_looks, target)
        judges = await asyncio.to_thread(self.database.read, target_judges, self.packs, target)
        query = urlencode({"service": parts[0], "agent": parts[1], "version": parts[2]})
        return page(
            "target.html",
            nav="targets",
            target=target,
            looks=looks,
            judges=judges,
            decisions_query=query,
            now=self.now(),
            ago=ago,
        )
