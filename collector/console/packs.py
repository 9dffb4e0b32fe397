"""The rule packs page: the packs in force, refused edits with their errors, and each rule's
evaluator health, from the same status `GET /api/v1/rules` answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from collector.console.render import page

SHORT_HASH = 12  # as the reload log prints it


def pack_rows(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Each pack file with its rules' health beside it (rules in the pack's order)."""
    health = {(r["pack"], r["rule"]): r for r in status["rules"]}
    rows = []
    for pack in status["packs"]:
        types = pack.get("rule_types", {})
        rules = [
            {"type": types.get(rule, ""), **health.get((pack["pack"], rule), {"rule": rule})}
            for rule in pack["rules"]
        ]
        rows.append(
            {
                **pack,
                "short_hash": (pack["sha256"] or "")[:SHORT_HASH],
                "types": sorted(set(types.values())),
                "health": rules,
            }
        )
    return rows


class PacksPage:
    """GET /packs. `status` is the evaluation stage's status (packs in force, rule health)."""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        self.status = status

    def register(self, app: web.Application) -> None:
        app.router.add_get("/packs", self._packs)

    async def _packs(self, request: web.Request) -> web.Response:
        status = self.status()
        rows = pack_rows(status)
        refused = sum(1 for row in rows if row["refused"])
        return page(
            "packs.html",
            nav="packs",
            packs=rows,
            refused=refused,
            counted_since=status["counted_since"],
        )
