"""`sextant judge calibrate | cards`: certifying LLM judges against people's labels, on a
running collector (which holds the judge's endpoint, key and pack in force)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from collector.cli._flags import add_command, add_format, add_url_token

CARD_COLUMNS = ["pack", "pack_version", "rule_id", "model", "cases", "unjudged", "agreement",
                "tpr", "tpr_lower", "tnr", "tnr_lower", "calibrated_at"]  # fmt: skip


def register(sub: Any) -> None:
    judge = add_command(
        sub, "judge", "calibrate LLM judges (EvaluatorCards)", "sextant judge cards"
    )
    judge_sub = judge.add_subparsers(dest="judge_command", required=True, metavar="COMMAND")
    calibrate = add_command(
        judge_sub,
        "calibrate",
        "run a judge rule over labelled cases and store its EvaluatorCard; exit 1 unless the"
        " card meets the pack's min_tpr and min_tnr",
        "sextant judge calibrate support-judges/helpful-answer --cases labelled.jsonl",
    )
    calibrate.add_argument("rule", help="PACK/RULE: a judge rule of a pack in force")
    calibrate.add_argument(
        "--cases",
        type=Path,
        required=True,
        help="JSONL cases (sextant export case) with people's verdict in expect.rules.RULE",
    )
    add_url_token(calibrate)
    add_format(calibrate, json_alias=True)
    calibrate.set_defaults(func=run_calibrate)
    cards = add_command(judge_sub, "cards", "the stored EvaluatorCards", "sextant judge cards")
    add_url_token(cards)
    add_format(cards, json_alias=True)
    cards.set_defaults(func=run_cards)


def run_calibrate(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.cli._errors import UsageError
    from collector.cli._output import Table, emit
    from collector.cli.rules import read_cases

    pack, _, rule = args.rule.partition("/")
    if not pack or not rule:
        raise UsageError(f"{args.rule}: give PACK/RULE, e.g. support-judges/helpful-answer")
    cases = read_cases(args.cases)
    card = AdminClient(args.url, args.token, timeout=3600).post_json(
        "/api/v1/judges/calibrate", {"pack": pack, "rule": rule, "cases": cases}
    )
    verdict = "certified" if card["certified"] else "NOT certified"
    shown = rounded(card)
    notes = [
        f"{verdict}: lower bounds TPR {shown['tpr_lower']} / TNR {shown['tnr_lower']} against"
        f" min_tpr {card['min_tpr']} / min_tnr {card['min_tnr']}"
    ]
    emit(Table([shown], CARD_COLUMNS, notes=notes), args.format, doc=card)
    return 0 if card["certified"] else 1


def rounded(card: dict[str, Any]) -> dict[str, Any]:
    """The rates to four places, for people (JSON keeps them whole)."""
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in card.items()}


def run_cards(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.cli._output import Table, emit

    found = AdminClient(args.url, args.token).get_json("/api/v1/judges/cards")
    emit(Table([rounded(c) for c in found["cards"]], CARD_COLUMNS), args.format, doc=found)
    return 0
