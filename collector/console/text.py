"""Stored text as the console shows it: never able to disguise itself."""

from __future__ import annotations

import re
from typing import Any

import markupsafe

# Characters that reorder the text around them (Unicode's bidirectional controls): a tool named
# "refund\u202eevil" would read as another name. Shown as <U+202E>, the way GitHub shows them.
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(value: Any) -> Any:
    """Text with its bidirectional controls written out (`<U+202E>`); markup the templates built
    themselves, and values that are not text, as they are."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return BIDI_CONTROLS.sub(lambda m: f"<U+{ord(m[0]):04X}>", value)
    return value
