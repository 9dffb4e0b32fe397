"""Cost: the agent's own cost attribute wins, then the price table; unknown models cost None."""

from __future__ import annotations

import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.config import load_config
from collector.normalize.wire import decode_request
from tests.support.otlp import new_span_id, new_trace_id, trace_request


def llm_run(*llm_attrs: dict):
    trace_id = new_trace_id()
    root = {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "name": "invoke_agent a",
        "attributes": {"gen_ai.operation.name": "invoke_agent"},
    }
    spans = [root] + [
        {
            "trace_id": trace_id,
            "span_id": new_span_id(),
            "parent_span_id": root["span_id"],
            "name": "chat",
            "start": 1_700_000_000_000_000_000 + i,
            "attributes": {"gen_ai.operation.name": "chat", **attrs},
        }
        for i, attrs in enumerate(llm_attrs)
    ]
    body = trace_request(spans).SerializeToString()
    return trace_id.hex(), decode_request("traces", "protobuf", body, 10_000).table.to_pylist()


def tokens(model: str, i: int = 1_000_000, o: int = 1_000_000) -> dict:
    return {
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": i,
        "gen_ai.usage.output_tokens": o,
    }


def test_price_table_by_longest_prefix() -> None:
    prices = PriceTable.load()
    assert prices.price("gpt-4.1-mini-2025-04-14") == (0.40, 1.60)
    assert prices.price("gpt-4.1-2025-04-14") == (2.00, 8.00)
    assert prices.price("my-own-model") is None
    assert prices.cost("gpt-4o-mini", 1000, 2000) == pytest.approx((1000 * 0.15 + 2000 * 0.6) / 1e6)


def test_agent_cost_wins_and_unknown_models_are_null() -> None:
    trace_id, rows = llm_run(
        tokens("gpt-4.1-mini"),
        {**tokens("gpt-4.1-mini"), "llm.cost.total": 0.5},
        {**tokens("gpt-4.1-mini"), "llm.cost.prompt": 0.1, "llm.cost.completion": 0.2},
        tokens("in-house-llm"),
    )
    t = build_trajectory(trace_id, rows, PriceTable.load())
    costs = [s.cost_usd for s in t.steps if s.kind == "llm"]
    assert costs[0] == pytest.approx(2.00)  # 1M × $0.40 + 1M × $1.60
    assert costs[1:3] == [pytest.approx(0.5), pytest.approx(0.3)]
    assert costs[3] is None
    assert t.cost_usd == pytest.approx(2.8)
    assert t.unpriced_llm_calls == 1


def test_config_overrides_the_shipped_prices() -> None:
    config = load_config(
        None,
        environ={},
        overrides={
            "pricing": {
                "models": {
                    "in-house-llm": {"input": 1, "output": 2},
                    "gpt-4.1-mini": {"input": 0, "output": 0},
                }
            }
        },
    )
    prices = PriceTable.load({k: v.model_dump() for k, v in config.pricing.models.items()})
    trace_id, rows = llm_run(tokens("in-house-llm"), tokens("gpt-4.1-mini"))
    t = build_trajectory(trace_id, rows, prices)
    assert [s.cost_usd for s in t.steps if s.kind == "llm"] == [3.0, 0.0]
    assert t.cost_usd == 3.0
