"""Judge routes: calibrating a judge rule of a pack in force on labelled cases or on reviewers'
labels (its EvaluatorCard is stored), listing the cards, and each judge's failure rate per
target, raw and corrected by its card."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import orjson
from aiohttp import web

from collector.admin.http import json_error, reply
from collector.errors import SextantError
from collector.evaluation.packs import PackSource, compiled
from collector.judges.calibrate import Card, card_of, certifies, judge_cases, labelled_cases
from collector.judges.rates import judge_rates
from collector.judges.reviews import UsedLabels, gold_set, review_card, reviewed_runs
from collector.store.database import Database
from collector.store.queries import jsonable, rows_as_dicts
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.targets import Target
from evaluators.durations import parse_duration
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
        # One calibration from reviews at a time: two at once would both take the same fresh
        # labels, and each run may certify one card only.
        self._from_reviews = asyncio.Lock()

    def register(self, app: web.Application) -> None:
        app.router.add_post("/api/v1/judges/calibrate", self._calibrate)
        app.router.add_get("/api/v1/judges/cards", self._cards)
        app.router.add_get("/api/v1/judges/rates", self._rates)

    async def _calibrate(self, request: web.Request) -> web.Response:
        """Body: {"pack", "rule", "cases": [case, ...]} or {"pack", "rule", "from_reviews":
        true, "include_used": bool}; 201 with the card stored, 409 when the reviewers' labels
        were used by an earlier card and the fresh ones cannot certify one."""
        try:
            body = await request.json(loads=orjson.loads)
            if not isinstance(body, dict):
                raise SextantError("expected a JSON object: pack, rule, and cases or from_reviews")
            pack, rule = self._judge_rule(str(body.get("pack")), str(body.get("rule")))
            if body.get("from_reviews") is True:
                if "cases" in body:
                    raise SextantError("give cases or from_reviews, not both")
                async with self._from_reviews:
                    card, extra = await self._from_review_labels(pack, rule, body)
            else:
                card, extra = await self._from_cases(pack, rule, body)
        except UsedLabels as exc:
            return json_error(409, str(exc))
        except (SextantError, orjson.JSONDecodeError) as exc:
            return json_error(400, str(exc))
        assert pack.judges is not None
        doc = {
            **jsonable(card.row()),
            **extra,
            "certified": certifies(card, pack),
            "min_tpr": pack.judges.min_tpr,
            "min_tnr": pack.judges.min_tnr,
        }
        return reply(doc, status=201)

    async def _from_cases(
        self, pack: RulePack, rule: JudgeRule, body: dict[str, Any]
    ) -> tuple[Card, dict[str, Any]]:
        if not isinstance(body.get("cases"), list):
            raise SextantError("expected a JSON object: pack, rule, cases (a list)")
        cases = labelled_cases(body["cases"], pack.name, rule.id)
        if not cases:
            raise SextantError("no cases: a card needs labelled runs")
        flagged = await judge_cases(pack, rule, cases)
        digest = hashlib.sha256(orjson.dumps(body["cases"])).hexdigest()
        card = card_of(pack, rule, cases, flagged, self.now(), digest)
        rows = rows_table("evaluator_cards", [card.row()])
        await asyncio.to_thread(self.writer.record, {"evaluator_cards": rows})
        return card, {}

    async def _from_review_labels(
        self, pack: RulePack, rule: JudgeRule, body: dict[str, Any]
    ) -> tuple[Card, dict[str, Any]]:
        """The card of the reviewers' labels on runs the judge scored, stored with the runs
        it used (in one commit, so a card never lacks them)."""
        include_used = body.get("include_used", False)
        if not isinstance(include_used, bool):
            raise SextantError("include_used must be true or false")
        assert pack.judges is not None
        labels, used = await asyncio.to_thread(
            self.database.read, reviewed_runs, pack.name, pack.version, rule.id
        )
        name = f"{pack.name}@{pack.version}/{rule.id}"
        gold = gold_set(labels, used, pack.judges, include_used, name)
        card, card_labels = review_card(pack, rule, gold, used, self.now())
        tables = {"evaluator_cards": rows_table("evaluator_cards", [card.row()])}
        if card_labels:
            tables["card_labels"] = rows_table("card_labels", card_labels)
        await asyncio.to_thread(self.writer.record, tables)
        return card, {"used_labels_left_out": gold.left_out}

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

    async def _rates(self, request: web.Request) -> web.Response:
        """?rule=PACK/RULE&service=&agent=&version=&window=24h: each judge rule's failure rate
        per target over the window (all runs stored without one), raw and corrected."""
        allowed = {"rule", "service", "agent", "version", "window"}
        unknown = set(request.query) - allowed
        if unknown:
            return json_error(
                400, f"unknown parameter {sorted(unknown)[0]!r}; use {sorted(allowed)}"
            )
        query = request.query
        target = None
        if "service" in query:
            target = Target(query["service"], query.get("agent", ""), query.get("version", ""))
        elif "agent" in query or "version" in query:
            return json_error(400, "give service (with agent and version) to pick a target")
        since = datetime(1970, 1, 1)
        if "window" in query:
            try:
                since = self.now() - timedelta(seconds=parse_duration(query["window"]))
            except ValueError as exc:
                return json_error(400, f"window: {exc}")
        packs = [compiled(text) for text in self.packs.snapshot()]
        rule = query.get("rule")
        if rule is not None:
            try:
                self._judge_rule(*rule.partition("/")[::2])
            except SextantError as exc:
                return json_error(400, f"rule: {exc}")
        found = await asyncio.to_thread(self.database.read, judge_rates, packs, since, rule, target)
        return reply({"rates": [jsonable(r.row()) for r in found]})


def stored_cards(cursor: Any) -> list[dict[str, Any]]:
    cursor.execute("SELECT * FROM evaluator_cards ORDER BY calibrated_at DESC")
    return [jsonable(row) for row in rows_as_dicts(cursor)]
