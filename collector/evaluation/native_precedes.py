"""A `precedes` rule in the native interpreter's form: its subject bindings with their JSON
paths split as `at_path` splits them, and the pack's approval recogniser (which tools are
approvals, the result shapes that give their status) carried in the rule, which reads the
statuses. A shape whose values JSON does not carry as Python holds them (a date) is marked,
and the interpreter refuses the rule."""

from __future__ import annotations

from typing import Any

from collector.evaluation.native_rules import PYTHON_ONLY, json_native, path_parts
from evaluators.approvals import Approvals, ApprovalShape
from evaluators.authorization import SubjectBinding
from evaluators.precedes import PrecedesRule


def binding_form(binding: SubjectBinding) -> dict[str, Any]:
    if binding.approval_argument is not None:
        side, approval = "arguments", binding.approval_argument
    else:
        side, approval = "result", binding.approval_result or "$"
    return {
        "approval": side,
        "approval_path": approval,
        "approval_parts": path_parts(approval),
        "action_path": binding.action_argument,
        "action_parts": path_parts(binding.action_argument),
    }


def shape_form(shape: ApprovalShape) -> dict[str, Any]:
    values = {"approved": shape.approved, "denied": shape.denied, "pending": shape.pending}
    if not json_native(list(values.values())):
        return {PYTHON_ONLY: "a value JSON does not carry as Python holds it"}
    return {"parts": path_parts(shape.path), **values}


def precedes_form(rule: PrecedesRule, approvals: Approvals, data: dict[str, Any]) -> None:
    """Completes the rule's native form (`data`) with its bindings and the pack's recogniser."""
    data["same_subject"] = [binding_form(b) for b in rule.same_subject]
    data["approvals"] = {
        "tools": list(approvals.tools),
        "results": [shape_form(s) for s in approvals.results],
        "defaults": approvals.defaults,
    }
