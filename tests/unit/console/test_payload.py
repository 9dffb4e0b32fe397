"""The console's highlighted JSON: every token escaped, bidirectional controls written out,
the text a reader copies still the JSON it was."""

from __future__ import annotations

import json

import markupsafe

from collector.console.payload import highlight, is_long, structured


def test_highlighted_json_is_escaped_and_still_reads_as_the_json() -> None:
    value = {"<script>alert(1)</script>": ["a\u202eb", 1.5, True, None, '"quoted"']}
    shown = highlight(json.dumps(value))
    assert isinstance(shown, markupsafe.Markup)
    assert "<script>" not in shown and "\u202e" not in shown
    assert '<span class="j-key">' in shown and '<span class="j-lit">true</span>' in shown
    text = markupsafe.Markup(shown).striptags()  # what a reader sees, entities undone
    assert json.loads(text.replace("<U+202E>", "\u202e")) == value


def test_text_that_is_not_json_is_escaped_as_it_is() -> None:
    assert highlight("<b>plain</b>") == "&lt;b&gt;plain&lt;/b&gt;"
    assert structured("<b>plain</b>") is None and structured("42") is None
    assert structured('[{"id": 1}]') is not None


def test_long_text_is_folded() -> None:
    assert not is_long("short") and is_long("x" * 601) and is_long("\n" * 12)
