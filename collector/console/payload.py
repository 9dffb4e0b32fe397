"""What a step carried, for reading: JSON indented and highlighted (keys, strings, numbers,
literals each a class the stylesheet colours: no script, no inline style), a model call's
messages, a retrieval's documents."""

from __future__ import annotations

import json
import re
from typing import Any

import markupsafe
import orjson

from collector.assembler.messages import chat
from collector.console.text import visible
from evaluators.documents import documents_of

# one token of json.dumps output: a string (a key when a colon follows), a number, a literal
TOKEN = re.compile(
    r'(?P<string>"(?:[^"\\]|\\.)*")(?P<colon>\s*:)?'
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<literal>true|false|null)"
)
# text past either bound is folded behind its first line
LONG_CHARS = 600
LONG_LINES = 12


def decode(value: Any) -> Any:
    """A JSON text decoded; any other text (or value) as it is."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def highlight(value: Any) -> markupsafe.Markup | None:
    """`value` (decoded from JSON text when it is some) as indented HTML, every token escaped
    (and its bidirectional controls written out) before it is wrapped in its class."""
    if value is None:
        return None
    value = decode(value)
    if isinstance(value, str):
        return markupsafe.escape(visible(value))
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    out: list[str] = []
    at = 0
    for match in TOKEN.finditer(text):
        out.append(str(markupsafe.escape(visible(text[at : match.start()]))))
        if match.group("string") is not None:
            css, token = ("key" if match.group("colon") else "str"), match.group("string")
        elif match.group("number") is not None:
            css, token = "num", match.group("number")
        else:
            css, token = "lit", match.group("literal")
        out.append(f'<span class="j-{css}">{markupsafe.escape(visible(token))}</span>')
        out.append(str(markupsafe.escape(match.group("colon") or "")))
        at = match.end()
    out.append(str(markupsafe.escape(visible(text[at:]))))
    return markupsafe.Markup("".join(out))


def structured(text: Any) -> markupsafe.Markup | None:
    """Text that is a JSON object or list (a tool's answer a model was sent), highlighted."""
    if not isinstance(text, str) or text.lstrip()[:1] not in ("{", "["):
        return None
    value = decode(text)
    return highlight(value) if isinstance(value, dict | list) else None


def is_long(value: Any) -> bool:
    """Text (or a value, as its JSON) too long to show unfolded."""
    if value is None:
        return False
    text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    return len(text) > LONG_CHARS or text.count("\n") >= LONG_LINES


def first_line(text: str, width: int = 160) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= width else line[:width] + "…"


def new_messages(messages: list[dict[str, Any]]) -> int:
    """Where the messages this call added begin: after the last assistant message of its
    input (the earlier turns every later call repeats), or at the start."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return last + 1


def llm_messages(attributes: dict[str, Any]) -> dict[str, Any] | None:
    """A model call's messages split for reading: `earlier` (what the previous calls already
    showed), `new` (what this call added), `output`; None when its span recorded none."""
    found = chat(attributes)
    if not found["input"] and not found["output"]:
        return None
    split = new_messages(found["input"])
    return {
        "earlier": found["input"][:split],
        "new": found["input"][split:],
        "output": found["output"],
    }


def retrieved(attributes: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A retrieval's documents (id, score, title, text), None when its span does not say."""
    documents = documents_of(attributes)
    if documents is None:
        return None
    return [
        {
            "id": d.id,
            "score": d.score,
            "title": d.metadata.get("title") or d.metadata.get("source"),
            "content": d.content,
            "metadata": d.metadata,
        }
        for d in documents
    ]
