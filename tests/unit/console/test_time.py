"""The one way the console prints a time: `2026-12-02 13:45:07 UTC`, whatever the store held."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from collector.console.render import ENVIRONMENT, when, when_text

NOW = datetime(2026, 12, 2, 13, 50, 7)


@pytest.mark.parametrize(
    "stored",
    [
        datetime(2026, 12, 2, 13, 45, 7, 123456),  # a TIMESTAMP column: naive UTC
        datetime(2026, 12, 2, 13, 45, 7, tzinfo=UTC),
        datetime(2026, 12, 2, 15, 45, 7, tzinfo=timezone(timedelta(hours=2))),
        "2026-12-02T13:45:07.123456Z",  # the API's JSON
        "2026-12-02T13:45:07+00:00",
        "2026-12-02 13:45:07.5",  # DuckDB's text of a TIMESTAMP
    ],
)
def test_every_stored_form_of_a_time_prints_the_same(stored: datetime | str) -> None:
    assert when_text(stored) == "2026-12-02 13:45:07 UTC"
    html = str(when(stored, NOW))
    assert html == (
        '<time datetime="2026-12-02T13:45:07Z" title="5 min ago">2026-12-02 13:45:07 UTC</time>'
    )


def test_no_time_is_a_dash_and_text_that_is_not_a_time_is_shown_escaped() -> None:
    assert when_text(None) == when_text("") == "—"
    assert str(when(None)) == "—"
    assert str(when('<b onmouseover="x">soon</b>')) == (
        "&lt;b onmouseover=&#34;x&#34;&gt;soon&lt;/b&gt;"
    )


def test_without_the_pages_clock_there_is_no_relative_title() -> None:
    assert str(when("2026-12-02T13:45:07Z")) == (
        '<time datetime="2026-12-02T13:45:07Z">2026-12-02 13:45:07 UTC</time>'
    )


def test_templates_reach_it_as_a_global() -> None:
    template = ENVIRONMENT.from_string("{{ when(at, now) }}")
    assert "2026-12-02 13:45:07 UTC" in template.render(at="2026-12-02T13:45:07Z", now=NOW)
