"""Rule packs: the model, and loading YAML with every error reported at its file and line."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import ErrorDetails

from evaluators.approvals import Approvals
from evaluators.guard import GuardSettings
from evaluators.judge import JudgeSettings
from evaluators.matchers import MISSING, Condition, Globs, Strict, checked_globs, text_matches
from evaluators.model import Trajectory
from evaluators.policies import DecisionPolicy
from evaluators.registry import RULE_TYPES, Rule
from evaluators.review_sla import ReviewSettings


class Selector(Strict):
    """Which targets a pack applies to; every given field must hold. A field is a glob or a
    list of globs, any of which matches."""

    service: Globs = Field(None, description="service.name: a glob or a list of globs.")
    agent: Globs = Field(None, description="The run's top-level agent name: glob(s).")
    version: Globs = Field(None, description="service.version: a glob or a list of globs.")
    attributes: dict[str, Condition] = Field(
        default_factory=dict, description="Root span attribute -> condition."
    )

    @field_validator("service", "agent", "version")
    @classmethod
    def _globs(cls, value: Globs) -> Globs:
        return checked_globs(value)

    def matches_target(self, service: str | None, agent: str | None, version: str | None) -> bool:
        """The service, agent and version globs alone: what a run's row tells without its
        spans (stages beside the pipeline skip runs no pack selects before loading them)."""
        for pattern, value in (
            (self.service, service),
            (self.agent, agent),
            (self.version, version),
        ):
            if pattern is not None and not text_matches(pattern, value):
                return False
        return True

    def matches(self, t: Trajectory) -> bool:
        if not self.matches_target(t.service_name, t.agent_name, t.service_version):
            return False
        if self.attributes:
            root = t.root
            attrs = root.attributes if root is not None else {}
            return all(c.check(attrs.get(k, MISSING)) for k, c in self.attributes.items())
        return True


class RulePack(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", description="Unique pack name.")
    version: str = Field(min_length=1, description="The pack's version, e.g. 1.4.0.")
    owner: str = Field(min_length=1, description="Who answers for its decisions.")
    description: str = Field("", description="What the pack is for.")
    selector: Selector = Field(default_factory=Selector, description="Which targets.")
    approvals: Approvals | None = Field(
        None,
        description="Which tools are approvals and which results grant or refuse them;"
        " without it the default recogniser applies (see docs/trajectories.md).",
    )
    rules: list[Rule] = Field(
        default_factory=list,
        description="The checks; a pack may hold none and only decision policies over others.",
    )
    decisions: list[DecisionPolicy] = Field(
        default_factory=list,
        description="Decision policies; without one, a failed rule's on_fail applies at once.",
    )
    judges: JudgeSettings | None = Field(
        None, description="The endpoint, budgets and trust of the pack's `judge` rules."
    )
    review: ReviewSettings = Field(
        default_factory=ReviewSettings,
        description="How long its review items may wait for a person (`sla`) and what an"
        " overdue one decides (`decision`, REVIEW by default).",
    )
    guard: GuardSettings = Field(
        default_factory=GuardSettings,
        description="How the runtime guard answers for the pack's targets: the tools that"
        " write (denied under DOWNGRADE), and the answers when the run is unknown or the guard"
        " cannot decide in time (docs/guard.md).",
    )

    @field_validator("review")
    @classmethod
    def _audited_rules(cls, review: ReviewSettings, info: ValidationInfo) -> ReviewSettings:
        """`audit.rules` names rules of this pack (checked here so the error points at
        `review:`, the block to fix)."""
        rules = info.data.get("rules")
        if review.audit is None or review.audit.rules is None or rules is None:
            return review
        known = {r.id for r in rules}
        unknown = [r for r in review.audit.rules if r not in known]
        if unknown:
            raise ValueError(
                f"audit.rules: no rule {unknown[0]!r} in this pack; its rules are"
                f" {', '.join(sorted(known)) or 'none'}"
            )
        return review

    @model_validator(mode="after")
    def _unique_ids(self) -> RulePack:
        if not self.rules and not self.decisions:
            raise ValueError(
                "a pack holds rules, decision policies (`decisions:`) over other packs, or both"
            )
        seen: set[str] = set()
        for rule in self.rules:
            if rule.id in seen:
                raise ValueError(f"rule id {rule.id!r} is used twice; ids are unique in a pack")
            seen.add(rule.id)
        if self.selector.attributes and any(RULE_TYPES[r.type].window for r in self.rules):
            raise ValueError(
                "window rules (drift, reliability) select targets by service, agent and version;"
                " selector.attributes cannot apply to them: put them in a pack without it"
            )
        if self.judges is None and any(r.type == "judge" for r in self.rules):
            raise ValueError("judge rules need the pack's `judges:` (endpoint and budgets)")
        policies = [p.id for p in self.decisions]
        for policy_id in policies:
            if policies.count(policy_id) > 1:
                raise ValueError(f"decision policy id {policy_id!r} is used twice")
        return self


@dataclass(frozen=True)
class LoadedPack:
    pack: RulePack
    source: str
    text: str
    sha256: str


class RulePackError(Exception):
    """A pack that cannot be used; `errors` lists every problem as `file:line: field: reason`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The YAML line of the value at a pydantic error location (1-based)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == part:
                    node, line = value, key.start_mark.line + 1
                    break
            # a discriminator tag or a model-level check: stay on the current node
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
            line = node.start_mark.line + 1
    return line


def field_path(loc: tuple[Any, ...], data: Any) -> str:
    """rules[2](id=approval).before.name: readable, with the rule id when known."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
            if isinstance(node, dict) and "id" in node:
                out += f"(id={node['id']})"
        elif isinstance(node, dict) and part not in node and part in RULE_TYPES:
            continue  # pydantic's discriminator tag, not a key of the file
        else:
            out += f".{part}" if out else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out or "(top level)"


def hint(error: ErrorDetails) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key (check the spelling; see the rule type's fields in docs/rules.md)"
    if error["type"] == "union_tag_invalid":
        return f"unknown rule type; known types: {', '.join(RULE_TYPES)}"
    if error["type"] == "union_tag_not_found":
        return f"every rule needs a `type`: one of {', '.join(RULE_TYPES)}"
    return str(error["msg"])


# What a pack may be. Packs are evaluated on every trajectory, so a pack's cost is paid on all
# traffic: these bound it (the shipped packs are a few KB with a handful of rules each).
MAX_PACK_BYTES = 1024 * 1024
MAX_RULES = 500
MAX_DEPTH = 32  # nesting of mappings and lists
MAX_INTEGER_DIGITS = 100
# libyaml when PyYAML has it: linear, and it refuses absurd nesting itself instead of spending
# minutes on it.
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
LONG_INTEGER = re.compile(rf"[-+]?[0-9_]{{{MAX_INTEGER_DIGITS + 1},}}")


def refuse_shapes(text: str, source: str) -> None:
    """One pass over the YAML events before anything is built from them: aliases (a few bytes
    expanding into gigabytes), nesting past MAX_DEPTH, integers too long to be a setting."""
    depth = 0
    for event in yaml.parse(text, Loader=LOADER):
        line = event.start_mark.line + 1 if event.start_mark else 0
        if isinstance(event, yaml.AliasEvent):
            raise RulePackError([f"{source}:{line}: YAML aliases (*name) are not allowed in packs"])
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise RulePackError([f"{source}:{line}: nested deeper than {MAX_DEPTH} levels"])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif (
            isinstance(event, yaml.ScalarEvent)
            and not event.style  # plain, not quoted
            and LONG_INTEGER.fullmatch(event.value)
        ):
            raise RulePackError(
                [f"{source}:{line}: an integer of more than {MAX_INTEGER_DIGITS} digits"]
            )


def load_text(text: str, source: str) -> LoadedPack:
    if len(text.encode()) > MAX_PACK_BYTES:
        raise RulePackError([f"{source}: larger than {MAX_PACK_BYTES} bytes; split the pack"])
    try:
        refuse_shapes(text, source)
        data = yaml.load(text, Loader=LOADER)
        root = yaml.compose(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise RulePackError([f"{where}: not valid YAML: {exc}"]) from exc
    except (RecursionError, ValueError) as exc:
        raise RulePackError([f"{source}: cannot be read as a pack: {exc}"]) from exc
    if not isinstance(data, dict):
        raise RulePackError([f"{source}:1: a rule pack is a mapping with name, version, rules"])
    rules = data.get("rules")
    if isinstance(rules, list) and len(rules) > MAX_RULES:
        line = line_of(root, ("rules",))
        raise RulePackError(
            [f"{source}:{line}: rules: {len(rules)} rules, more than {MAX_RULES} in one pack"]
        )
    try:
        pack = RulePack.model_validate(data)
    except ValidationError as exc:
        errors = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            line = line_of(root, loc)
            where = f"{source}:{line}" if line else source
            errors.append(f"{where}: {field_path(loc, data)}: {hint(error)}")
        raise RulePackError(errors) from exc
    return LoadedPack(pack, source, text, hashlib.sha256(text.encode()).hexdigest())


def load_pack(path: Path) -> LoadedPack:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RulePackError([f"{path}: cannot read: {exc.strerror}"]) from exc
    except UnicodeDecodeError as exc:
        raise RulePackError([f"{path}: not UTF-8 text: {exc}"]) from exc
    return load_text(text, str(path))
