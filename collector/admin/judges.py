"""Judge routes: calibrating a judge rule of a pack in force on labelled cases (its
EvaluatorCard is stored), and listing the cards."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from aiohttp import web

from collector.admin.http import json_error, reply
from collector.errors import SextantError
from collector.evaluation.packs import PackSource, compiled
from collector.judges.calibrate import card_of, certifies, judge_cases, labelled_cases
from collector.store.database import Database
from collector.store.queries import jsonable, rows_as_dicts
from collector.store.tables import rows_table
from collector.store.writer import STORE_TIMEOUT_SECONDS, Writer
from evaluators.judge import JudgeRule
from evaluators.rulepack import RulePack


class JudgeRoutes:
    def __init__(
        self,
        packs: PackSource,
        database: Database,
        writer: Writer,
        now: Callable[[], datetime],
    ) -> None:
        self.packs = packs
        self.database = database
        self.writer = writer
        self.now = now

    def register(self, app: web.Application) -> None:
        app.router.add_post("/api/v1/judges/calibrate", self._calibrate)
        app.router.add_get("/api/v1/judges/cards", self._cards)

    async def _calibrate(self, request: web.Request) -> web.Response:
        """Body: {"pack", "rule", "cases": [case, ...]}; 201 with the card stored."""
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict) or not isinstance(body.get("cases"), list):
                raise SextantError("expected a JSON object: pack, rule, cases (a list)")
            pack, rule = self._judge_rule(str(body.get("pack")), str(body.get("rule")))
            cases = labelled_cases(body["cases"], pack.name, rule.id)
            if not cases:
                raise SextantError("no cases: a card needs labelled runs")
        except (SextantError, orjson.JSONDecodeError) as exc:
            return json_error(400, str(exc))
        flagged = await judge_cases(pack, rule, cases)
        digest = hashlib.sha256(orjson.dumps(body["cases"])).hexdigest()
        card = card_of(pack, rule, cases, flagged, self.now(), digest)
        stored = rows_table("evaluator_cards", [card.row()])
        future = self.writer.submit_tables({"evaluator_cards": stored})
        await asyncio.to_thread(future.result, STORE_TIMEOUT_SECONDS)
        assert pack.judges is not None
        doc = {
            **jsonable(card.row()),
            "certified": certifies(card, pack),
            "min_tpr": pack.judges.min_tpr,
            "min_tnr": pack.judges.min_tnr,
        }
        return reply(doc, status=201)

    def _judge_rule(self, name: str, rule_id: str) -> tuple[RulePack, JudgeRule]:
        for text in self.packs.snapshot():
            pack = compiled(text)
            if pack.name != name:
                continue
            for rule in pack.rules:
                if rule.id == rule_id and isinstance(rule, JudgeRule):
                    return pack, rule
            raise SextantError(f"pack {name} has no judge rule {rule_id!r}")
        raise SextantError(f"no pack {name!r} in force")

    async def _cards(self, request: web.Request) -> web.Response:
        found = await asyncio.to_thread(self.database.read, stored_cards)
        return reply({"cards": found})


def stored_cards(cursor: Any) -> list[dict[str, Any]]:
    cursor.execute("SELECT * FROM evaluator_cards ORDER BY calibrated_at DESC")
    return [jsonable(row) for row in rows_as_dicts(cursor)]
