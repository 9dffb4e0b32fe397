"""The canary both window-rule unit tests compare: a travel agent whose 1.5 versions replace
`hold_seat` with a new tool, its selector and the drift rule over its tool mix, and runs of it
written into a store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from evaluators.rulepack import Selector
from evaluators.window import DriftRule
from tests.support.store import RunStore

A = ["search_flights", "hold_seat", "confirm_booking"]
B = ["search_flights", "reserve_seat_v2", "confirm_booking"]  # hold_seat gone, a new tool
RUNS = 20
TRAVEL = Selector(service="travel-desk*", agent="travel-agent")


def canary(**overrides: Any) -> DriftRule:
    return DriftRule.model_validate(
        {
            "id": "canary-tool-mix",
            "type": "drift",
            "reason": "canary_behaviour_changed",
            "compare": {
                "baseline": {"service.version": "1.4.*"},
                "candidate": {"service.version": "1.5.*"},
            },
            "metrics": ["tool_choice"],
            "alpha": 0.01,
            "min_samples": 15,
            **overrides,
        }
    )


def send(store: RunStore, version: str, tools: list[str], runs: int = RUNS) -> set[str]:
    """`runs` runs of one version, a minute apart, the newest a minute ago: their trace ids."""
    return {store.run(tools, version=version, ago=timedelta(minutes=1 + i)) for i in range(runs)}
