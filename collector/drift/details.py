"""What a drift result was decided on, as the JSON stored in its `details` column: each side's
value of the metric, the raw and the adjusted p-value, and for the tool mix each tool's share of
runs on both sides with its own test. The console's canary page prints exactly this, so what it
shows is what the decision saw, not a recomputation."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

# Per metric, its values on both sides, as compare_sides measured them.
Values = dict[str, Any]
# Per test of a metric made of several (tool_choice:TOOL): (raw p, adjusted p).
Tests = Mapping[str, tuple[float, float]]


def percentiles(values: np.ndarray) -> dict[str, float] | None:
    """p50 and p95 of a side's samples (NaN left out); None when it has none."""
    kept = values[~np.isnan(values)]
    if not len(kept):
        return None
    p50, p95 = np.percentile(kept, [50, 95])
    return {"p50": float(p50), "p95": float(p95)}


def rate(hits: float, n: float) -> float | None:
    return float(hits) / n if n else None


def tool_shares(
    b_used: Mapping[str, float], c_used: Mapping[str, float], b_units: int, c_units: int
) -> dict[str, dict[str, float | None]]:
    """Per tool, the share of each side's runs (or cases) that call it."""
    return {
        tool: {
            "baseline": rate(b_used.get(tool, 0.0), b_units),
            "current": rate(c_used.get(tool, 0.0), c_units),
        }
        for tool in sorted(set(b_used) | set(c_used))
    }


def movement(baseline: float | None, current: float | None) -> str:
    """How a tool moved: `appeared` (no baseline run called it), `vanished` (no canary run
    does), `shifted` or `unchanged`."""
    b, c = baseline or 0.0, current or 0.0
    if b == 0 and c > 0:
        return "appeared"
    if c == 0 and b > 0:
        return "vanished"
    return "unchanged" if b == c else "shifted"


def details(
    metric: str, values: Values, p_raw: float, p_adjusted: float, tests: Tests, mode: str
) -> dict[str, Any]:
    """The `details` of one metric's result. Tools are listed most moved first."""
    found: dict[str, Any] = {
        "mode": mode,
        "baseline": values.get("baseline"),
        "current": values.get("current"),
        "unit": values.get("unit"),
        "p_raw": p_raw,
        "p_adjusted": p_adjusted,
    }
    shares = values.get("tools")
    if shares is not None:
        rows = []
        for tool, share in shares.items():
            raw, adjusted = tests.get(f"{metric}:{tool}", (None, None))
            rows.append(
                {
                    "tool": tool,
                    "baseline": share["baseline"],
                    "current": share["current"],
                    "change": movement(share["baseline"], share["current"]),
                    "p_raw": raw,
                    "p_adjusted": adjusted,
                }
            )
        found["tools"] = sorted(
            rows, key=lambda r: (-abs((r["current"] or 0.0) - (r["baseline"] or 0.0)), r["tool"])
        )
    return found


def encoded(found: Mapping[str, Any] | None) -> str | None:
    """JSON text for the store; NaN and infinities (not JSON) become null."""
    if found is None:
        return None
    return json.dumps(clean(found), sort_keys=True)


def clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value
