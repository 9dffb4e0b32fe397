"""The judge stage's looks, pack by pack, on a real store: a pack that is behind or failing
shows in the lag and holds up no other pack."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.assembler.prices import PriceTable
from collector.bench.judge import start_judge
from collector.clock import FakeClock
from collector.config.evaluation import JudgesConfig
from collector.config.writer import WriterConfig
from collector.evaluation.packs import PackText, compiled
from collector.judges.asking import Asker
from collector.judges.budget import Budget
from collector.judges.cards import Trust
from collector.judges.metrics import JudgeMetrics
from collector.judges.plan import Call, Judge, Outcome
from collector.judges.stage import JudgeStage, judge_rules
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from tests.support.store import RunStore
from tests.support.trajectories import run
from tests.support.wait import wait_for

PACK = """
name: {name}
version: 1.0.0
owner: support-sre
selector: {{service: support-desk}}
judges:
  endpoint: {{base_url: "{url}", model: judge-mini, timeout: 1s}}
  price: {{input: 0.5, output: 2.0}}
rules:
  - id: helpful-answer
    type: judge
    reason: unhelpful_answer
    prompt: "Grade: {{{{ answer }}}}"
    pass_when: {{score_gte: 0.5}}
"""


def pack(name: str, url: str = "http://127.0.0.1:9/v1") -> PackText:
    text = PACK.format(name=name, url=url)
    return PackText(name, hashlib.sha256(text.encode()).hexdigest(), text)


@dataclass
class Packs:
    texts: tuple[PackText, ...]

    def snapshot(self) -> tuple[PackText, ...]:
        return self.texts


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "sextant.duckdb")
    db.open()
    yield db
    db.close()


def stage_of(
    database: Database, *names: str, batch: int = 2, kind: type[JudgeStage] = JudgeStage
) -> JudgeStage:
    return kind(
        JudgesConfig(batch=batch),
        database,
        None,  # type: ignore[arg-type]  # nothing is stored by these looks
        Packs(tuple(pack(n) for n in names)),
        PriceTable.load(),
        JudgeMetrics(CollectorRegistry()),
        FakeClock(),
    )


def test_a_pack_skipped_for_its_waiting_calls_shows_its_lag(database: Database) -> None:
    stage = stage_of(database, "slow-judges", "fast-judges")
    now: datetime = stage.clock.now()
    stage._pending["slow-judges"] = 2  # a look's worth of calls still waiting
    stage._last_closed["slow-judges"] = now - timedelta(seconds=120)
    stage.tick()
    assert stage.metrics.lag.collect()[0].samples[0].value == 120.0


class OnePackFails(JudgeStage):
    """A stage whose look at one pack fails, as a look whose query or plan raises."""

    looked: list[str]

    def _look(self, text: PackText, now: datetime, oldest: datetime) -> tuple[int, bool]:
        self.looked.append(text.name)
        if text.name == "broken-judges":
            raise RuntimeError("prompt template failed")
        return super()._look(text, now, oldest)


def test_a_pack_whose_look_fails_holds_up_no_other_pack(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    failing = stage_of(database, "broken-judges", "other-judges", kind=OnePackFails)
    assert isinstance(failing, OnePackFails)
    failing.looked = []
    with caplog.at_level(logging.ERROR):
        failing.tick()
        failing.tick()
    assert failing.looked == ["broken-judges", "other-judges"] * 2
    failed = [r for r in caplog.records if "broken-judges" in r.getMessage()]
    assert len(failed) == 2 and "prompt template failed" in (failed[0].exc_text or "")


class PricesBroken(Asker):
    """An asker whose cost reckoning raises once the judge has answered."""

    def cost(self, j: Judge, input_tokens: int | None, output_tokens: int | None) -> float | None:
        raise ValueError("price table unreadable")


def test_a_call_sharing_a_failed_calls_prompt_gets_its_failure(database: Database) -> None:
    scripted = start_judge()
    try:
        text = pack("support-judges", scripted.base_url)
        stage = stage_of(database)
        asker = PricesBroken(stage.calls, stage.cache, stage.asker.prices, stage.clock)
        rule = judge_rules(text)[0]
        j = Judge(compiled(text), text.sha256, rule, Trust(False, "no card"))
        first = Call(j, run(), "Grade: GOOD", "key-1", estimate=0.01)
        second = Call(j, run(), "Grade: GOOD", "key-1", estimate=0.01, follows=True)
        budget = Budget(j.pack.judges)  # type: ignore[arg-type]

        async def both() -> list[Outcome | BaseException]:
            flight = asker.flights[first.key] = asyncio.get_running_loop().create_future()
            try:
                return await asyncio.gather(
                    asker.ask(first, budget, flight),
                    asker.follow(second, flight),
                    return_exceptions=True,
                )
            finally:
                await stage.calls.session.close()

        asked, followed = asyncio.run(both())
    finally:
        scripted.close()
    assert isinstance(asked, ValueError)
    assert isinstance(followed, Outcome)
    assert (followed.outcome, followed.error) == (
        "provider_error",
        "ValueError: price table unreadable",
    )
    assert len(scripted.requests) == 1  # asked once all the same


def test_a_judge_result_that_fails_to_store_is_judged_again(tmp_path: Path) -> None:
    runs = RunStore(tmp_path / "sextant.duckdb")
    scripted = start_judge()
    text = pack("support-judges", scripted.base_url)
    stage = JudgeStage(
        JudgesConfig(),
        runs.database,
        stopped := Writer(runs.database, WriterConfig(), StoreMetrics(CollectorRegistry())),
        Packs((text,)),
        PriceTable.load(),
        JudgeMetrics(CollectorRegistry()),
        FakeClock(),
    )
    trace_id = runs.run(["lookup_customer"], service="support-desk")
    runs.cursor.execute(
        "UPDATE trajectories SET closed_at = ?, store_seq = nextval('store_seq')",
        [stage.clock.now() - timedelta(minutes=1)],
    )
    stopped.shutdown(0.0)  # refuses what is submitted: the result is not stored
    live = Writer(runs.database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    live.start()
    stage.calls.start()
    try:
        stage.tick()
        wait_for(lambda: stage._pending.get("support-judges") == 0, timeout=10)
        stage.writer = live
        stage.tick()

        def stored() -> list[tuple[str, str, str]] | None:
            rows = runs.cursor.execute(
                "SELECT trace_id, reason, message FROM results WHERE rule_type = 'judge'"
            ).fetchall()
            return rows or None

        [(judged, reason, message)] = wait_for(stored, timeout=10)
        assert (judged, reason) == (trace_id, "judge_uncalibrated")
        assert "unhelpful (0.10)" in message  # the judgement made before the store failed
    finally:
        stage.calls.shutdown(time.monotonic() + 5)
        live.shutdown(time.monotonic() + 5)
        scripted.close()
        runs.close()
    assert len(scripted.requests) == 1  # judged again from the cache: asked once
