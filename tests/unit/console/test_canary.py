"""How the canary section prints what a look stored: shares and rates as percentages, p-values
to three digits, a continuous metric as its p50 and p95, links to each side's runs; stored names
(tools, versions) escaped and their bidirectional controls written out."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import parse_qs, urlsplit

import pytest

from collector.console.canary import Look, p_text, percent, runs_url, side_value
from collector.console.render import ENVIRONMENT
from collector.targets import Target

TARGET = Target("travel-desk", "travel-agent", "1.5.0")
START, END = datetime(2026, 12, 2, 13, 0, 0), datetime(2026, 12, 2, 14, 0, 0)


@pytest.mark.parametrize(
    ("value", "text"), [(None, "—"), (0.0, "0.0 %"), (1.0, "100.0 %"), (0.3333, "33.3 %")]
)
def test_a_share_is_a_percentage(value: float | None, text: str) -> None:
    assert percent(value) == text


@pytest.mark.parametrize(
    ("value", "text"), [(None, "—"), (1.0, "1"), (0.0032123, "0.00321"), (1.7e-6, "1.7e-06")]
)
def test_a_p_value_has_three_significant_digits(value: float | None, text: str) -> None:
    assert p_text(value) == text


def test_a_side_value_is_its_percentiles_or_its_rate() -> None:
    assert side_value({"p50": 1234.5, "p95": 2000.0}, "ms") == "p50 1,234 ms · p95 2,000 ms"
    assert side_value({"p50": 4.0, "p95": 6.5}, "steps") == "p50 4 steps · p95 6.5 steps"
    assert side_value({"p50": 0.0125, "p95": 0.03}, "USD") == "p50 0.0125 USD · p95 0.03 USD"
    assert side_value(0.25, None) == "25.0 %"
    assert side_value(None, "ms") == "—"


def test_a_sides_runs_are_the_list_filtered_to_its_version_and_window() -> None:
    url = urlsplit(runs_url(TARGET, "1.4.0", START, END))
    assert url.path == "/trajectories"
    assert parse_qs(url.query) == {
        "target": ["travel-desk/travel-agent/1.4.0"],
        "since": ["2026-12-02T13:00:00Z"],
        "until": ["2026-12-02T14:00:00Z"],
    }
    # a window ending within a second: its last runs are in
    later = runs_url(TARGET, "1.5.0", START.replace(microsecond=5), END.replace(microsecond=1))
    assert parse_qs(urlsplit(later).query)["since"] == ["2026-12-02T13:00:00Z"]
    assert parse_qs(urlsplit(later).query)["until"] == ["2026-12-02T14:00:01Z"]


def test_stored_names_are_escaped_and_shown_written_out() -> None:
    hostile = '<img src=x onerror="alert(1)">refund_\u202etxt.exe'
    look = Look("travel", "canary", END, START, END, "service.version 1.4.*", ['1.4"><b>'])
    look.metrics.append(
        {
            "metric": "tool_choice",
            "verdict": "fail",
            "reason": "canary_behaviour_changed",
            "effect_size": 0.5,
            "p_value": 0.001,
            "baseline_n": 20,
            "current_n": 20,
            "details": {
                "p_raw": 0.0001,
                "p_adjusted": 0.001,
                "tools": [
                    {
                        "tool": hostile,
                        "baseline": 0.0,
                        "current": 1.0,
                        "change": "appeared",
                        "p_raw": 1e-5,
                        "p_adjusted": 1e-4,
                    }
                ],
            },
        }
    )
    html = ENVIRONMENT.get_template("target.html").render(
        nav="targets", target=TARGET, looks=[look], judges=[], decisions_query="", now=END
    )
    assert "<img" not in html and "<b>" not in html and "\u202e" not in html
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;refund_&lt;U+202E&gt;txt.exe" in html
    assert 'data-change="appeared"' in html and "100.0 %" in html
