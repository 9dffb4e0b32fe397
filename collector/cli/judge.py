"""`sextant judge calibrate | cards`: certifying LLM judges against people's labels, on a
running collector (which holds the judge's endpoint, key and pack in force)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from collector.cli._flags import add_command, add_format, add_url_token

CARD_COLUMNS = ["pack", "pack_version", "rule_id", "model", "source", "cases", "unjudged",
                "agreement", "tpr", "tpr_lower", "tnr", "tnr_lower", "reused_labels",
                "calibrated_at"]  # fmt: skip
RATE_COLUMNS = ["pack", "rule_id", "service", "agent", "version", "judged", "flagged",
                "observed_rate", "corrected_rate", "corrected_lower", "corrected_upper",
                "why"]  # fmt: skip


def register(sub: Any) -> None:
    judge = add_command(
        sub, "judge", "calibrate LLM judges (EvaluatorCards)", "sextant judge cards"
    )
    judge_sub = judge.add_subparsers(dest="judge_command", required=True, metavar="COMMAND")
    calibrate = add_command(
        judge_sub,
        "calibrate",
        "run a judge rule over labelled cases, or count its verdicts against reviewers' labels,"
        " and store its EvaluatorCard; exit 1 unless the card meets the pack's min_tpr and"
        " min_tnr",
        "sextant judge calibrate support-judges/helpful-answer --from-reviews",
    )
    calibrate.add_argument("rule", help="PACK/RULE: a judge rule of a pack in force")
    source = calibrate.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cases",
        type=Path,
        help="JSONL cases (sextant export case) with people's verdict in expect.rules.RULE",
    )
    source.add_argument(
        "--from-reviews",
        action="store_true",
        help="reviewers' labels on runs the judge scored (each run certifies one card only)",
    )
    calibrate.add_argument(
        "--include-used",
        action="store_true",
        help="with --from-reviews: count labels an earlier card used too (the card says so)",
    )
    add_url_token(calibrate)
    add_format(calibrate, json_alias=True)
    calibrate.set_defaults(func=run_calibrate)
    cards = add_command(judge_sub, "cards", "the stored EvaluatorCards", "sextant judge cards")
    add_url_token(cards)
    add_format(cards, json_alias=True)
    cards.set_defaults(func=run_cards)
    rates = add_command(
        judge_sub,
        "rates",
        "each judge rule's failure rate per target: as the judge reports it, and corrected for"
        " its errors by its EvaluatorCard (Rogan-Gladen, with a 95 % interval)",
        "sextant judge rates support-judges/helpful-answer --window 24h",
    )
    rates.add_argument("rule", nargs="?", help="PACK/RULE (default: every judge rule in force)")
    rates.add_argument("--target", help="SERVICE/AGENT/VERSION: one target (default: every one)")
    rates.add_argument("--window", help="runs judged this far back, e.g. 24h (default: all)")
    add_url_token(rates)
    add_format(rates, json_alias=True)
    rates.set_defaults(func=run_rates)


def run_calibrate(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.cli._errors import UsageError
    from collector.cli._output import Table, emit
    from collector.cli.rules import read_cases

    pack, _, rule = args.rule.partition("/")
    if not pack or not rule:
        raise UsageError(f"{args.rule}: give PACK/RULE, e.g. support-judges/helpful-answer")
    body: dict[str, Any] = {"pack": pack, "rule": rule}
    if args.from_reviews:
        body |= {"from_reviews": True, "include_used": args.include_used}
    elif args.include_used:
        raise UsageError("--include-used goes with --from-reviews")
    else:
        body["cases"] = read_cases(args.cases)
    card = AdminClient(args.url, args.token, timeout=3600).post_json(
        "/api/v1/judges/calibrate", body
    )
    verdict = "certified" if card["certified"] else "NOT certified"
    shown = rounded(card)
    notes = [
        f"{verdict}: lower bounds TPR {shown['tpr_lower']} / TNR {shown['tnr_lower']} against"
        f" min_tpr {card['min_tpr']} / min_tnr {card['min_tnr']}"
    ]
    if card.get("not_applicable"):
        notes.append(f"{card['not_applicable']} labels said the rule does not apply: left out")
    if card.get("used_labels_left_out"):
        notes.append(
            f"{card['used_labels_left_out']} labels an earlier card used were left out:"
            " calibrated on fresh ones only"
        )
    if card.get("reused_labels"):
        notes.append(
            f"{card['reused_labels']} of its labels were used by an earlier card"
            " (--include-used): not a single-use gold set"
        )
    if card.get("source") == "reviews" and one_sided(card):
        notes.append(
            "every labelled run is one the judge failed: labels taken only from its reviews"
            " cannot show the bad runs it passes; label a sample of the runs it passed too"
        )
    emit(Table([shown], CARD_COLUMNS, notes=notes), args.format, doc=card)
    return 0 if card["certified"] else 1


def one_sided(card: dict[str, Any]) -> bool:
    """Whether the judge failed every run the card counts (people label what a queue shows
    them, and an uncalibrated judge's queue holds only the runs it failed)."""
    positives, negatives = card["positives"], card["negatives"]
    passed = positives - round((card["tpr"] or 0.0) * positives)  # missed bad runs
    passed += round((card["tnr"] or 0.0) * negatives)  # good runs passed
    return positives + negatives > 0 and passed == 0


def rounded(card: dict[str, Any]) -> dict[str, Any]:
    """The rates to four places, for people (JSON keeps them whole)."""
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in card.items()}


def run_cards(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.cli._output import Table, emit

    found = AdminClient(args.url, args.token).get_json("/api/v1/judges/cards")
    emit(Table([rounded(c) for c in found["cards"]], CARD_COLUMNS), args.format, doc=found)
    return 0


def run_rates(args: argparse.Namespace) -> int:
    from urllib.parse import urlencode

    from collector.cli._client import AdminClient
    from collector.cli._errors import UsageError
    from collector.cli._output import Table, emit

    query: dict[str, str] = {}
    if args.rule:
        if "/" not in args.rule:
            raise UsageError(f"{args.rule}: give PACK/RULE, e.g. support-judges/helpful-answer")
        query["rule"] = args.rule
    if args.target:
        parts = args.target.split("/")
        if len(parts) != 3:
            raise UsageError(f"{args.target}: give SERVICE/AGENT/VERSION (a part may be empty)")
        query |= dict(zip(("service", "agent", "version"), parts, strict=True))
    if args.window:
        query["window"] = args.window
    path = "/api/v1/judges/rates" + ("?" + urlencode(query) if query else "")
    found = AdminClient(args.url, args.token).get_json(path)
    notes = [
        "observed: the share of runs the judge failed; corrected: with its card's TPR and TNR"
        " taken out (Rogan-Gladen), 95 % interval by Lang-Reiczigel"
    ]
    rows = [rounded(r) for r in found["rates"]]
    emit(Table(rows, RATE_COLUMNS, notes=notes), args.format, doc=found)
    return 0
