"""Templates (Jinja2, autoescaped) and the small filters the pages share."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import jinja2
import markupsafe
from aiohttp import web

from evaluators.base import Decision

# Characters that reorder the text around them (Unicode's bidirectional controls): a tool named
# "refund\u202eevil" would read as another name. Shown as <U+202E>, the way GitHub shows them.
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(value: Any) -> Any:
    """Text with its bidirectional controls written out (`<U+202E>`); markup the templates built
    themselves, and values that are not text, as they are."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return BIDI_CONTROLS.sub(lambda m: f"<U+{ord(m[0]):04X}>", value)
    return value


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


def page(template: str, status: int = 200, **context: Any) -> web.Response:
    html = ENVIRONMENT.get_template(template).render(**context)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
