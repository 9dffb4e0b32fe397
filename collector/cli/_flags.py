"""The flags every command shares, added by one helper each so they read the same everywhere."""

from __future__ import annotations

import argparse
import os
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

DEFAULT_URL = "http://localhost:9464"
URL_ENV = "SEXTANT_URL"
TOKEN_ENV = "SEXTANT_TOKEN"
FORMATS = ("table", "json", "csv")


class Parser(argparse.ArgumentParser):
    """argparse's parser, keeping the flags it was given (argparse keeps them only in private
    tables): a misspelt one is answered with the closest. Sub-commands' parsers are of the
    same class (add_subparsers makes them of the parent's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.flags: list[str] = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.flags.extend(f for f in action.option_strings if f.startswith("--"))
        return action

    def error(self, message: str) -> NoReturn:
        """argparse's error, with the closest choice to a misspelt command or value."""
        import difflib
        import re

        wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if wrong:
            choices = re.findall(r"'([^']*)'", wrong[2])
            close = difflib.get_close_matches(wrong[1], choices, n=1, cutoff=0.6)
            message += f"; did you mean {close[0]!r}?" if close else ""
        super().error(message)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each flag's help, and the epilog's example kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        # No "(default: None)" or "(default: False)": an unset flag's help says what happens.
        if action.default in (None, False, []) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_command(
    sub: Any, name: str, summary: str, example: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A sub-command whose --help shows the defaults and one example, like every other."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description or summary,
        epilog=f"example:\n  {example}",
        formatter_class=HelpFormatter,
    )
    # The deepest sub-command sets it last: the parser whose usage a misspelt flag shows.
    parser.set_defaults(command_parser=parser)
    return parser


def add_url_token(parser: argparse.ArgumentParser) -> None:
    """--url and --token: the admin API of a running collector."""
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_ENV) or DEFAULT_URL,
        help=f"the admin API of a running collector (default: ${URL_ENV} when set, else"
        f" {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        default=None,
        metavar="TOKEN",
        help=f"bearer token for the admin API (default: ${TOKEN_ENV} when set)",
    )


def add_db(parser: argparse.ArgumentParser, verb: str = "read") -> None:
    """--db: a stopped collector's DuckDB file instead of --url."""
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"{verb} a DuckDB file instead of --url (a stopped collector's sextant.duckdb)",
    )


def add_source(parser: argparse.ArgumentParser, parquet: bool = False) -> None:
    """--url/--token, --db and, where a command reads exports, --parquet."""
    add_url_token(parser)
    add_db(parser)
    if parquet:
        parser.add_argument(
            "--parquet",
            type=Path,
            default=None,
            metavar="DIR",
            help="read a `sextant export parquet` directory instead of --url",
        )


def add_format(parser: argparse.ArgumentParser, json_alias: bool = False) -> None:
    """--format table|json|csv; `--json` stays as the older spelling of --format json."""
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")
    if json_alias:
        parser.add_argument(
            "--json",
            dest="format",
            action="store_const",
            const="json",
            help="same as --format json",
        )


def duration(text: str) -> float:
    """An argparse type: seconds in the one grammar (30s, 5m, 1h, 7d, plain seconds)."""
    from evaluators.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def moment(text: str) -> datetime:
    """An argparse type: an ISO 8601 time or an age (6h, 7d), as naive UTC."""
    from collector.clock import SystemClock
    from evaluators.durations import parse_time

    try:
        return parse_time(text, SystemClock().now())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_window(parser: argparse.ArgumentParser, what: str = "runs that started") -> None:
    """--since / --until in the one time grammar."""
    parser.add_argument(
        "--since",
        type=moment,
        default=None,
        metavar="TIME",
        help=f"{what} at or after: ISO 8601 time or age (6h, 7d)",
    )
    parser.add_argument(
        "--until", type=moment, default=None, metavar="TIME", help=f"{what} before: ISO or age"
    )


def positive_int(text: str) -> int:
    """An argparse type for counts that must be at least 1."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value
