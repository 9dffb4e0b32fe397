"""`sextant`: builds the one command-line parser from each command group, runs the command and
turns its outcome into the exit code; the only place that exits the process."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from collector import __version__
from collector.cli import (
    alerts,
    bench,
    dataset,
    decisions,
    demo,
    drift,
    export,
    judge,
    replay,
    rules,
    serve,
    show,
    sql,
    trajectories,
)
from collector.cli._flags import HelpFormatter, Parser

OK, CHECK_FAILED, USAGE, UNREACHABLE, INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = f"""exit codes:
  {OK}    ok
  {CHECK_FAILED}    the command ran and its check failed (a rule test, an --expect, the demo's
       expectations), or the collector refused the request (HTTP 4xx/5xx, not found)
  {USAGE}    usage or configuration error (a bad flag, an unreadable pack, cases or config file)
  {UNREACHABLE}    cannot reach the collector (--url) or open the store (--db, --parquet)

example:
  sextant serve                          # a collector with the built-in rules
  sextant trajectories --verdict fail    # the latest failed runs
  sextant show --latest                  # the most recent one as a tree
  sextant <command> --help               # every flag of a command, with its default"""

# The reference, a page per subject in the source tree's docs/; the README links the same pages.
REFERENCE_PAGES = (
    ("install.md", "installing the wheel elsewhere, the similarity model, the image"),
    ("ingest.md", "what the receivers accept and answer, the ingest journal, the decoder"),
    ("security.md", "tokens, the admin port's threat model, outbound calls, TLS"),
    ("cli.md", "the command line's shared flags, listing runs, exit codes"),
    ("trajectories.md", "how traces close, steps, sextant.* attributes, approvals, cost"),
    ("rules.md", "rule packs, the step matcher, every rule type, verdicts, loading"),
    ("sessions.md", "sessions, RAG evidence, MCP evidence"),
    ("drift.md", "drift against a baseline or a canary, reliability over repeated cases"),
    ("judges.md", "judge rules, EvaluatorCards, similarity rules, evaluation events"),
    ("decisions.md", "decisions, their states and policies, alerts"),
    ("guard.md", "the runtime guard an agent asks before a tool call, its integrations"),
    ("console.md", "the console's pages and who may open it"),
    ("configuration.md", "every configuration key, environment variables, flags"),
    ("store.md", "the DuckDB tables and their columns"),
    ("scale-out.md", "several replicas behind a gateway"),
    ("sql-and-replay.md", "live read-only SQL, Parquet export, replay, cases and evidence"),
    ("metrics.md", "the self-metrics on GET :9464/metrics"),
    ("performance.md", "sextant bench, the current figures, the profile behind them"),
    ("architecture.md", "how it is built, and the layout of the source tree"),
)
REFERENCE = "reference, in the source tree's docs/ (the README links each page):\n" + "\n".join(
    f"  docs/{page:<18} {subject}" for page, subject in REFERENCE_PAGES
)

GROUPS = (
    serve,
    bench,
    show,
    trajectories,
    rules,
    sql,
    replay,
    export,
    dataset,
    decisions,
    alerts,
    demo,
    drift,
    judge,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="sextant",
        description="An OpenTelemetry trace collector and online evaluator for AI agents.",
        epilog=f"{EXIT_CODES}\n\n{REFERENCE}",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sextant {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return parser


def suggestion(parser: argparse.ArgumentParser, unknown: str) -> str:
    """'did you mean --x?' for a misspelt flag: the closest of the command's own flags."""
    import difflib

    flag = unknown.split("=", 1)[0]
    if not flag.startswith("-") or not isinstance(parser, Parser):
        return ""
    close = difflib.get_close_matches(flag, parser.flags, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments; a flag the command does not know is shown with the command's usage (not
    the top-level one) and the closest flag it has."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
        hint = suggestion(command, unknown[0])
        command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    return args


def exit_code(exc: BaseException) -> int:
    """The exit code of an error a command raised on purpose; the message says the rest."""
    from collector.cli._errors import Unreachable, UsageError
    from collector.errors import ConfigError, SextantError

    if isinstance(exc, Unreachable):
        return UNREACHABLE
    if isinstance(exc, ConfigError | UsageError):
        return USAGE
    if isinstance(exc, SextantError):
        return CHECK_FAILED
    raise exc


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s sextant %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    args = parse(build_parser(), argv)
    command: Callable[[argparse.Namespace], int] = args.func
    try:
        code = command(args)
    except KeyboardInterrupt:
        code = INTERRUPTED
    except Exception as exc:
        code = exit_code(exc)
        print(f"sextant: {exc}", file=sys.stderr)
    sys.exit(code)
