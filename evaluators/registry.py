"""Rule type -> (config model, evaluator); the one place that knows every rule type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from evaluators.base import Finding
from evaluators.budget import BudgetRule, evaluate_budget
from evaluators.consistency import ConsistencyRule, evaluate_consistency
from evaluators.external import EvaluationRule
from evaluators.flow import FlowRule, evaluate_flow
from evaluators.judge import JudgeRule
from evaluators.mcp import McpRule, evaluate_mcp
from evaluators.model import Trajectory
from evaluators.precedes import PrecedesRule, evaluate_precedes
from evaluators.presence import AbsenceRule, PresenceRule, evaluate_absence, evaluate_presence
from evaluators.recovery import RecoveryRule, evaluate_recovery
from evaluators.retrieval import RetrievalRule, evaluate_retrieval
from evaluators.secrets import SecretsRule, evaluate_secrets
from evaluators.sessions import (
    ApprovalLifetimeRule,
    RepeatedFailuresRule,
    Session,
    evaluate_approval_lifetime,
    evaluate_repeated_failures,
    evaluate_session_budget,
)
from evaluators.similarity import SimilarityRule
from evaluators.tool_args import ToolArgsRule, evaluate_tool_args
from evaluators.trajectory import TrajectoryRule, evaluate_trajectory
from evaluators.window import DriftRule, ReliabilityRule


@dataclass(frozen=True)
class RuleType:
    model: type
    # None for rules the collector evaluates apart from a run's round: window rules over the
    # store on a schedule, judges beside the pipeline (a model call is too slow for a round).
    evaluate: Callable[[Trajectory, Any], Finding] | None
    # True when missing steps could change the verdict: on an incomplete trajectory such a rule
    # gives `review` (trace_incomplete) instead of a verdict it cannot stand behind.
    needs_all_steps: bool
    window: bool = False
    # Over a session's turns, for rules with `scope: session` (evaluated by the session stage).
    session: Callable[[Session, Any], Finding] | None = None


RULE_TYPES: dict[str, RuleType] = {
    "presence": RuleType(PresenceRule, evaluate_presence, True),
    "absence": RuleType(AbsenceRule, evaluate_absence, False),
    "trajectory": RuleType(TrajectoryRule, evaluate_trajectory, True),
    "tool_args": RuleType(ToolArgsRule, evaluate_tool_args, False),
    "precedes": RuleType(PrecedesRule, evaluate_precedes, True),
    "consistency": RuleType(ConsistencyRule, evaluate_consistency, False),
    "budget": RuleType(BudgetRule, evaluate_budget, True, session=evaluate_session_budget),
    "recovery": RuleType(RecoveryRule, evaluate_recovery, True),
    "secrets": RuleType(SecretsRule, evaluate_secrets, False),
    "pii": RuleType(SecretsRule, evaluate_secrets, False),
    "drift": RuleType(DriftRule, None, False, window=True),
    "reliability": RuleType(ReliabilityRule, None, False, window=True),
    "flow": RuleType(FlowRule, evaluate_flow, False),
    "retrieval": RuleType(RetrievalRule, evaluate_retrieval, True),
    "mcp": RuleType(McpRule, evaluate_mcp, False),
    "judge": RuleType(JudgeRule, None, True),
    "evaluation": RuleType(EvaluationRule, None, False),
    "similarity": RuleType(SimilarityRule, None, True),
    "approval_lifetime": RuleType(
        ApprovalLifetimeRule, None, True, session=evaluate_approval_lifetime
    ),
    "repeated_failures": RuleType(
        RepeatedFailuresRule, None, False, session=evaluate_repeated_failures
    ),
}

Rule = Annotated[
    PresenceRule
    | AbsenceRule
    | TrajectoryRule
    | ToolArgsRule
    | PrecedesRule
    | ConsistencyRule
    | BudgetRule
    | RecoveryRule
    | SecretsRule
    | DriftRule
    | ReliabilityRule
    | FlowRule
    | RetrievalRule
    | McpRule
    | JudgeRule
    | EvaluationRule
    | SimilarityRule
    | ApprovalLifetimeRule
    | RepeatedFailuresRule,
    Field(discriminator="type"),
]
