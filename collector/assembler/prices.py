"""Token prices per model: the shipped table, overridable in config; unknown models cost None."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml


class PriceTable:
    """USD per million input / output tokens, looked up by the longest matching model prefix."""

    def __init__(self, models: dict[str, tuple[float, float]]) -> None:
        self._models = models
        self._prefixes = sorted(models, key=len, reverse=True)
        self._cache: dict[str, tuple[float, float] | None] = {}

    @classmethod
    def load(cls, overrides: dict[str, Any] | None = None) -> PriceTable:
        text = resources.files("collector.data").joinpath("prices.yaml").read_text()
        table = {
            name: (float(p["input"]), float(p["output"]))
            for name, p in yaml.safe_load(text)["models"].items()
        }
        for name, p in (overrides or {}).items():
            table[name] = (float(p["input"]), float(p["output"]))
        return cls(table)

    def in_lookup_order(self) -> list[tuple[str, float, float]]:
        """(model prefix, input, output) per model, longest prefix first: the order `price`
        looks them up in (the native builder is handed them so)."""
        return [(p, *self._models[p]) for p in self._prefixes]

    def price(self, model: str | None) -> tuple[float, float] | None:
        if not model:
            return None
        if model not in self._cache:
            key = model.lower()
            self._cache[model] = next(
                (self._models[p] for p in self._prefixes if key.startswith(p.lower())), None
            )
        return self._cache[model]

    def cost(self, model: str | None, input_tokens: int | None, output_tokens: int | None):
        price = self.price(model)
        if price is None or (input_tokens is None and output_tokens is None):
            return None
        return ((input_tokens or 0) * price[0] + (output_tokens or 0) * price[1]) / 1_000_000
