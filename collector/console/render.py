"""Templates (Jinja2, autoescaped) and the small filters the pages share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jinja2
import markupsafe
from aiohttp import web

from collector.console import payload
from collector.console.text import visible
from evaluators.base import Decision

ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("collector.console", "templates"),
    autoescape=jinja2.select_autoescape(default=True),
    undefined=jinja2.StrictUndefined,  # a page that names a missing value fails its test
    trim_blocks=True,
    lstrip_blocks=True,
    finalize=visible,  # every {{ value }} of every page: stored text is never rendered raw
)


def ago(moment: datetime | None, now: datetime) -> str:
    """'42 s ago', '3 min ago', '5 h ago', '2 d ago' (naive UTC on both sides)."""
    if moment is None:
        return "never"
    seconds = max(0.0, (now - moment).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


TIME_FORMAT = "%Y-%m-%d %H:%M:%S UTC"  # every time the console prints, on every page


def utc(value: datetime | str | None) -> datetime | None:
    """A stored time as naive UTC: a datetime (naive ones are UTC already, as the store keeps
    them) or ISO 8601 text (`...Z`, `+00:00` or no offset). None for nothing or for text that is
    not a time."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def when_text(value: datetime | str | None) -> str:
    """'2026-12-02 13:45:07 UTC' (to the second); '—' for nothing; text that is not a time
    as it is, rather than a page that fails."""
    moment = utc(value)
    if moment is None:
        return "—" if value is None or value == "" else str(value)
    return moment.strftime(TIME_FORMAT)


def when(value: datetime | str | None, now: datetime | None = None) -> markupsafe.Markup:
    """The time as every page prints it, in a <time> element whose `datetime` machines read and
    whose title says how long ago it was (when the page knows its `now`)."""
    moment = utc(value)
    if moment is None:
        return markupsafe.Markup("{}").format(when_text(value))
    stamp = moment.isoformat(timespec="seconds") + "Z"
    now = utc(now)
    if now is None:
        return markupsafe.Markup('<time datetime="{}">{}</time>').format(stamp, when_text(moment))
    return markupsafe.Markup('<time datetime="{}" title="{}">{}</time>').format(
        stamp, ago(moment, now), when_text(moment)
    )


def decision_class(decision: str) -> str:
    """A CSS class per kind of decision: pass, look (REVIEW, FAIL), stop (the ones that act)."""
    if decision == Decision.PASS:
        return "pass"
    return "look" if decision in (Decision.REVIEW, Decision.FAIL) else "stop"


ENVIRONMENT.filters["decision_class"] = decision_class
# what the pages use to show payloads: highlighted JSON, long text folded
ENVIRONMENT.globals.update(
    highlight=payload.highlight,
    structured=payload.structured,
    is_long=payload.is_long,
    first_line=payload.first_line,
    when=when,
)


def page(template: str, status: int = 200, **context: Any) -> web.Response:
    html = ENVIRONMENT.get_template(template).render(**context)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
