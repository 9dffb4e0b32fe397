"""Pack regexes, matched in time linear in the text whatever the pattern.

A pack's author (or a pack pulled from elsewhere) writes patterns that run over end-user text
and tool output. Python's `re` backtracks: `^(a+)+$` against thirty `a`s and a `!` takes seconds,
and every extra character doubles it, while holding the interpreter. RE2 (through the
`google-re2` binding) never backtracks; what it cannot do in linear time — backreferences and
lookaround — it refuses, so such a pattern is refused when the pack loads, with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2

OPTIONS = re2.Options()
OPTIONS.log_errors = False  # a refused pattern is reported once, by the pack loader
# Python's `\s` over ASCII text, spelled for RE2, whose `\s` is only [\t\n\f\r ]: a pattern
# written for `re` means the same in RE2 with its `\s` replaced by this.
ASCII_SPACE = r"[\t\n\x0b\x0c\r \x1c-\x1f]"


def with_ascii_spaces(pattern: str) -> str:
    r"""A pattern written for `re` with its `\s` spelled for RE2: `ASCII_SPACE` outside a
    character class, and its members inside one (RE2 has no nested classes: there a `[` is a
    literal and the first `]` closes the class, so a class inside a class would not match)."""
    members = ASCII_SPACE[1:-1]
    out: list[str] = []
    i, in_class, class_start = 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            pair = pattern[i : i + 2]
            out.append((members if in_class else ASCII_SPACE) if pair == r"\s" else pair)
            i += 2
            continue
        if in_class and c == "]" and i > class_start:  # `[]` and `[^]` hold a literal `]`
            in_class = False
        elif not in_class and c == "[":
            in_class = True
            class_start = i + 2 if pattern[i + 1 : i + 2] == "^" else i + 1
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Any:
    """The compiled pattern (with `search` and `finditer` as in `re`), or ValueError saying
    why it is refused. Cached: rules compile their patterns for every trajectory."""
    try:
        return re2.compile(pattern, options=OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(
            f"invalid regex {pattern!r}: {reason} (patterns run on RE2, in linear time:"
            " no backreferences or lookaround)"
        ) from exc


def checked_pattern(pattern: str | None) -> str | None:
    """For validators: the pattern itself when it compiles."""
    if pattern is not None:
        compile_pattern(pattern)
    return pattern


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    import jsonschema  # loaded with the first schema: the CLI starts without it

    if validator.is_type(instance, "string") and not compile_pattern(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = compile_pattern(pattern)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def schema_validator(schema: dict[str, Any]) -> Any:
    """A JSON Schema validator whose `pattern` and `patternProperties` match with RE2; raises
    `jsonschema.SchemaError` or ValueError (a refused pattern) for a bad schema."""
    import jsonschema

    base = jsonschema.validators.validator_for(schema)
    base.check_schema(schema)
    for pattern in schema_patterns(schema):
        compile_pattern(pattern)
    linear = jsonschema.validators.extend(
        base, {"pattern": _pattern, "patternProperties": _pattern_properties}
    )
    return linear(schema)


def schema_patterns(schema: Any) -> Iterator[str]:
    """Every regex in a JSON Schema (`pattern` values and `patternProperties` keys)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key == "patternProperties" and isinstance(value, dict):
                yield from value
            yield from schema_patterns(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from schema_patterns(item)
