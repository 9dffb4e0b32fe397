"""Parameters of the reliability report and of baseline saving, shared by the CLI and the API."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from collector.drift.baselines import NAME_PATTERN, BaselineSpec, parse_target
from collector.drift.reliability import case_runs, report
from collector.drift.sides import Side, matching
from collector.errors import SextantError
from evaluators import durations

RULE_PATTERN = r"^[a-z0-9][a-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"


def parse_time(text: str | None, now: datetime) -> datetime | None:
    """`since`/`until` of the API and the CLI, in the one grammar of evaluators.durations."""
    if not text:
        return None
    try:
        return durations.parse_time(text, now)
    except ValueError as exc:
        raise SextantError(str(exc)) from exc


def parse_ks(text: str | None) -> list[int]:
    try:
        ks = [int(k) for k in (text or "1,3,5").split(",") if k.strip()]
    except ValueError as exc:
        raise SextantError(f"k {text!r}: expected integers such as 1,3,5") from exc
    if not ks or any(not 1 <= k <= 1000 for k in ks):
        raise SextantError(f"k {text!r}: each k must be from 1 to 1000")
    return sorted(set(ks))


@dataclass(frozen=True)
class ReliabilityQuery:
    ks: list[int]
    side: Side
    rule: str | None

    @classmethod
    def parse(cls, params: dict[str, Any], now: datetime) -> ReliabilityQuery:
        unknown = set(params) - {"k", "target", "since", "until", "rule"}
        if unknown:
            raise SextantError(f"unknown parameter {sorted(unknown)[0]!r}")
        rule = params.get("rule") or None
        if rule is not None and not re.match(RULE_PATTERN, rule):
            raise SextantError(f"rule {rule!r}: expected PACK/RULE")
        side = Side(
            *matching(*parse_target(params.get("target"))),
            parse_time(params.get("since"), now),
            parse_time(params.get("until"), now),
        )
        return cls(parse_ks(params.get("k")), side, rule)

    def run(self, cursor: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        return report(case_runs(cursor, self.side, self.rule), self.ks)


def baseline_spec(params: dict[str, Any], now: datetime) -> BaselineSpec:
    unknown = set(params) - {"name", "target", "since", "until"}
    if unknown:
        raise SextantError(f"unknown parameter {sorted(unknown)[0]!r}")
    name = params.get("name") or ""
    if not re.match(NAME_PATTERN, name):
        raise SextantError(f"baseline name {name!r}: letters, digits, '.', '_' and '-' only")
    service, agent, version = parse_target(params.get("target"))
    return BaselineSpec(
        name,
        service,
        agent,
        version,
        parse_time(params.get("since"), now),
        parse_time(params.get("until"), now),
    )
