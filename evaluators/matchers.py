"""The step matcher every rule type shares: kind, name, status, agent, attributes, arguments,
result."""

from __future__ import annotations

import fnmatch
import json
import re
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaluators.model import Step
from evaluators.regex import checked_pattern, compile_pattern, schema_validator

MISSING = object()


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Condition(Strict):
    """A test on one value. A bare YAML scalar means `equals`."""

    equals: Any = Field(MISSING, description="The value equals this.")
    not_equals: Any = Field(MISSING, description="The value differs from this (or is absent).")
    one_of: list[Any] | None = Field(None, description="The value is one of these.")
    regex: str | None = Field(None, description="The value (as text) matches this regex.")
    glob: str | None = Field(None, description="The value (as text) matches this glob.")
    exists: bool | None = Field(None, description="The key is present (true) or absent (false).")
    gt: float | None = Field(None, description="Numeric value greater than this.")
    gte: float | None = Field(None, description="Numeric value at least this.")
    lt: float | None = Field(None, description="Numeric value less than this.")
    lte: float | None = Field(None, description="Numeric value at most this.")
    json_schema: dict[str, Any] | None = Field(
        None, alias="schema", description="The value validates against this JSON schema."
    )

    @model_validator(mode="before")
    @classmethod
    def _scalar_means_equals(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else {"equals": value}

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return checked_pattern(value)

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            import jsonschema

            try:
                schema_validator(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"invalid JSON schema: {exc.message}") from exc
        return value

    def model_post_init(self, _: Any) -> None:
        self._regex, self._validator  # noqa: B018 - compiled with the pack, not on first use

    # What a rule compiles is kept in cached properties, not private attributes: pydantic reads
    # those through `__getattr__`, some microseconds each, on every step a rule looks at.
    @cached_property
    def _regex(self) -> Any:
        return None if self.regex is None else compile_pattern(self.regex)

    @cached_property
    def _validator(self) -> Any:
        return None if self.json_schema is None else schema_validator(self.json_schema)

    def check(self, value: Any) -> bool:
        """`value` is MISSING when the key is absent."""
        present = value is not MISSING
        if self.exists is not None and present != self.exists:
            return False
        if self.not_equals is not MISSING and present and same(value, self.not_equals):
            return False
        if not present:
            return self.exists is False or (
                self.exists is None and self.not_equals is not MISSING and self._only_negative()
            )
        if self.equals is not MISSING and not same(value, self.equals):
            return False
        if self.one_of is not None and not any(same(value, v) for v in self.one_of):
            return False
        text = value if isinstance(value, str) else str(value)
        if self._regex is not None and not self._regex.search(text):
            return False
        if self.glob is not None and not fnmatch.fnmatchcase(text, self.glob):
            return False
        if any(b is not None for b in (self.gt, self.gte, self.lt, self.lte)):
            number = as_number(value)
            if number is None:
                return False
            if self.gt is not None and not number > self.gt:
                return False
            if self.gte is not None and not number >= self.gte:
                return False
            if self.lt is not None and not number < self.lt:
                return False
            if self.lte is not None and not number <= self.lte:
                return False
        return self._validator is None or self._validator.is_valid(value)

    def _only_negative(self) -> bool:
        return (
            self.equals is MISSING
            and self.one_of is None
            and self.regex is None
            and (self.glob is None and self.json_schema is None)
        )


def same(a: Any, b: Any) -> bool:
    """Equality that does not take true for 1 (or false for 0)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
WHOLE_PATH = re.compile(r"(?:\.?[^.\[\]\s]+|\[\d+\])*")


def checked_path(path: str) -> str:
    """A pack's JSON path (`$.a.b[0]`, `$` for the whole value), refused at load when malformed."""
    if not WHOLE_PATH.fullmatch(path.removeprefix("$")):
        raise ValueError(
            f"invalid JSON path {path!r}: write keys with dots and list indexes in brackets,"
            " e.g. $.decision.status or $.items[0].id ($ alone is the whole value)"
        )
    return path


def at_path(document: Any, path: str) -> Any:
    """`$.a.b[0].c` (the `$.` is optional) inside a JSON value; MISSING when absent."""
    node = document
    for key, index in PATH_PART.findall(path.removeprefix("$").lstrip(".")):
        if key:
            if not isinstance(node, dict) or key not in node:
                return MISSING
            node = node[key]
        else:
            i = int(index)
            if not isinstance(node, list) or i >= len(node):
                return MISSING
            node = node[i]
    return node


def is_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern or "[" in pattern  # (no set built per call)


def text_matches(pattern: str | list[str], value: str | None) -> bool:
    """`value` is `pattern` (exact, or a glob when it has `*?[`); a list matches when any does."""
    if value is None:
        return False
    if isinstance(pattern, list):
        return any(text_matches(p, value) for p in pattern)
    if is_glob(pattern):
        return fnmatch.fnmatchcase(value, pattern)
    return value == pattern


Globs = str | list[str] | None


def checked_globs(value: Globs) -> Globs:
    """One glob or a non-empty list of non-empty globs (an empty list would match nothing)."""
    globs = [value] if isinstance(value, str) else value
    if globs is not None and (not globs or any(not g for g in globs)):
        raise ValueError("give a glob or a non-empty list of non-empty globs")
    return value


class StepMatcher(Strict):
    """Which steps a rule is about. Every given field must hold."""

    kind: str | list[str] | None = Field(
        None, description="Step kind(s); a tool call also matches `tool` whatever its kind."
    )
    name: Globs = Field(
        None, description="Step name, exact or glob (`update_*`), or a list of them (any)."
    )
    name_regex: str | None = Field(None, description="Step name regex.")
    agent: Globs = Field(
        None, description="Enclosing agent name, exact or glob, or a list of them (any)."
    )
    status: str | None = Field(None, pattern="^(ok|error)$", description="ok or error.")
    attributes: dict[str, Condition] = Field(
        default_factory=dict, description="Span attribute name -> condition."
    )
    args: dict[str, Condition] = Field(
        default_factory=dict, description="JSON path into the tool arguments -> condition."
    )
    result: dict[str, Condition] = Field(
        default_factory=dict,
        description="JSON path into the tool's parsed result ($ = all of it) -> condition.",
    )

    @field_validator("name_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return checked_pattern(value)

    @field_validator("name", "agent")
    @classmethod
    def _globs(cls, value: Globs) -> Globs:
        return checked_globs(value)

    @field_validator("result")
    @classmethod
    def _result_paths(cls, value: dict[str, Condition]) -> dict[str, Condition]:
        for path in value:
            checked_path(path)
        return value

    def model_post_init(self, _: Any) -> None:
        self._name_regex, self._kinds  # noqa: B018 - compiled with the pack (see Condition)

    @cached_property
    def _name_regex(self) -> Any:
        return None if self.name_regex is None else compile_pattern(self.name_regex)

    @cached_property
    def _kinds(self) -> frozenset[str] | None:
        if self.kind is None:
            return None
        return frozenset([self.kind] if isinstance(self.kind, str) else self.kind)

    def matches(self, step: Step) -> bool:
        kinds = self._kinds
        if kinds is not None and step.kind not in kinds and step.span_kind not in kinds:
            return False
        if self.name is not None and not text_matches(self.name, step.name):
            return False
        if self._name_regex is not None and not self._name_regex.search(step.name or ""):
            return False
        if self.agent is not None and not text_matches(self.agent, step.agent_name):
            return False
        if self.status is not None and step.status != self.status:
            return False
        for key, condition in self.attributes.items():
            if not condition.check(step.attributes.get(key, MISSING)):
                return False
        for path, condition in self.args.items():
            if not condition.check(at_path(step.arguments, path)):
                return False
        for path, condition in self.result.items():
            value = MISSING if step.result is None else at_path(step.result_value, path)
            if not condition.check(value):
                return False
        return True

    def describe(self) -> str:
        """The matcher as a reader wrote it, in YAML flow style (`step(kind: tool, args:
        {"$.amount": {"gt": 100}})`): whole, because a cut matcher cannot be found in the pack."""
        return self._described

    @cached_property
    def _described(self) -> str:
        # once per compiled pack: messages name the matcher on every evaluation (and every
        # runtime guard call)
        fields = self.model_dump(exclude_defaults=True, by_alias=True)
        parts = [f"{k}: {v if isinstance(v, str) else flow(v)}" for k, v in fields.items()]
        return "step(" + ", ".join(parts) + ")"


def flow(value: Any) -> str:
    """A value as compact JSON, which is also YAML flow style; never a Python repr."""
    return json.dumps(value, default=str, ensure_ascii=False, separators=(", ", ": "))
