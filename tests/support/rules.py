"""Rule packs for evaluator tests: a pack of given rules, one rule's verdict on a run, and the
approval-before-write rule with its approval step."""

from __future__ import annotations

from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import RulePack
from tests.support.trajectories import tool


def pack(*rules: dict) -> RulePack:
    return RulePack.model_validate(
        {"name": "p", "version": "1", "owner": "o", "rules": list(rules)}
    )


def verdict(rule: dict, trajectory):  # type: ignore[no-untyped-def]
    (result,) = evaluate_pack(trajectory, pack(rule))
    return result


APPROVAL = {
    "id": "r",
    "type": "precedes",
    "reason": "approval_boundary_violation",
    "before": {"name": "request_approval", "attributes": {"sextant.approval.status": "approved"}},
    "then": {"kind": "tool", "name": "update_*"},
    "require_ok": True,
}


def approval(seq: int, status: str = "approved", **kw):  # type: ignore[no-untyped-def]
    return tool(seq, "request_approval", {}, attrs={"sextant.approval.status": status}, **kw)
