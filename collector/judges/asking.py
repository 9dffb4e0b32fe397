"""Asking the judges, on the calls' loop: one call per prompt in flight (the others wait for its
answer), each pack within its own slots (`judges.concurrency`) and budget."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from collector.assembler.prices import PriceTable
from collector.clock import Clock
from collector.judges.budget import Budget, JudgementCache
from collector.judges.calls import CallLoop
from collector.judges.client import SYSTEM, Unavailable, judge
from collector.judges.plan import Call, Judge, Outcome

# A prompt's tokens are at most its UTF-8 bytes (every token of a BPE vocabulary is at least one
# byte), plus the chat template's few per message: the most a call's input may cost.
TEMPLATE_TOKENS = 32


class Asker:
    def __init__(
        self, calls: CallLoop, cache: JudgementCache, prices: PriceTable, clock: Clock
    ) -> None:
        self.calls = calls
        self.cache = cache
        self.prices = prices
        self.clock = clock
        self.flights: dict[str, asyncio.Future[Outcome]] = {}  # the answer each prompt will get
        self._limits: dict[str, tuple[int, asyncio.Semaphore]] = {}  # pack -> its slots

    def answer(self, call: Call, budget: Budget) -> Coroutine[Any, Any, Outcome]:
        """The call's answer: asked, or that of the identical call already in flight."""
        if call.follows:
            return self.follow(call, self.flights[call.key])
        self.flights[call.key] = flight = asyncio.get_running_loop().create_future()
        return self.ask(call, budget, flight)

    def slots(self, call: Call) -> asyncio.Semaphore:
        """The pack's calls in flight at once (`judges.concurrency`): one pack's slow judge
        holds only its own slots."""
        settings = call.judge.pack.judges
        assert settings is not None
        name = call.judge.pack.name
        found = self._limits.get(name)
        if found is None or found[0] != settings.concurrency:
            found = self._limits[name] = (
                settings.concurrency,
                asyncio.Semaphore(settings.concurrency),
            )
        return found[1]

    async def ask(self, call: Call, budget: Budget, flight: asyncio.Future[Outcome]) -> Outcome:
        """The one call for a prompt; whoever follows it gets its answer through `flight`."""
        settings = call.judge.pack.judges
        assert settings is not None
        try:
            async with self.slots(call):
                try:
                    reply = await judge(
                        self.calls.session, settings.endpoint, call.judge.model, call.prompt
                    )
                except Unavailable as exc:
                    budget.spent(self.clock.monotonic(), None, call.estimate)
                    outcome = Outcome(exc.outcome, error=str(exc))
                else:
                    cost = self.cost(call.judge, reply.input_tokens, reply.output_tokens)
                    budget.spent(self.clock.monotonic(), cost, call.estimate)
                    self.cache.put(call.key, reply.judgement)
                    outcome = Outcome(
                        "ok",
                        reply.judgement,
                        None,
                        reply.input_tokens,
                        reply.output_tokens,
                        cost,
                        reply.seconds,
                    )
            flight.set_result(outcome)
            return outcome
        except Exception as exc:  # its followers get the failure, not a cancellation
            if not flight.done():
                flight.set_exception(exc)
                flight.add_done_callback(lambda f: f.exception())  # retrieved: no warning
            raise
        finally:
            if not flight.done():
                flight.cancel()
            del self.flights[call.key]

    async def follow(self, call: Call, flight: asyncio.Future[Outcome]) -> Outcome:
        """The answer of the identical call in flight, at no cost; when that call failed, the
        failure (the run is reviewed, its result stored like any judge error)."""
        try:
            first = await asyncio.shield(flight)
        except Exception as exc:  # a cancellation (shutdown) is not one: the run waits
            return Outcome("provider_error", error=f"{type(exc).__name__}: {exc}")
        if first.judgement is not None:
            return Outcome("cached", first.judgement, cost_usd=0.0)
        return Outcome(first.outcome, error=first.error)

    def estimate(self, j: Judge, prompt: str) -> float | None:
        """The most a call may cost: every prompt byte a token, `max_tokens` answered."""
        assert j.pack.judges is not None
        tokens = len(SYSTEM.encode()) + len(prompt.encode()) + TEMPLATE_TOKENS
        return self.cost(j, tokens, j.pack.judges.endpoint.max_tokens)

    def cost(self, j: Judge, input_tokens: int | None, output_tokens: int | None) -> float | None:
        settings = j.pack.judges
        assert settings is not None
        if settings.price is not None:
            price = (settings.price.input, settings.price.output)
            return PriceTable({j.model: price}).cost(j.model, input_tokens, output_tokens)
        return self.prices.cost(j.model, input_tokens, output_tokens)
