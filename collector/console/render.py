"""Templates (Jinja2, autoescaped) and the small filters the pages share."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import jinja2
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
)


def page(template: str, status: int = 200, **context: Any) -> web.Response:
    html = ENVIRONMENT.get_template(template).render(**context)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
