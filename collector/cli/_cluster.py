"""`--cluster`: one read-only question asked of every replica's admin API at once, the answers
joined with the replica each came from.

A replica that does not answer is named on stderr and makes the command exit 1: a cluster
view missing a replica says so, it never passes for the whole cluster.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from collector.cluster import replica_name

if TYPE_CHECKING:  # the client (and gRPC's status codes under it) loads when a command runs
    from collector.cli._client import AdminClient

T = TypeVar("T")


def add_cluster(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster",
        metavar="URLS",
        default=None,
        help="ask every replica: their admin URLs, comma-separated",
    )


def replicas(args: argparse.Namespace) -> list[str]:
    from collector.cli._errors import UsageError

    urls = [u.strip().rstrip("/") for u in (args.cluster or "").split(",") if u.strip()]
    if not urls:
        raise UsageError("--cluster needs the replicas' admin URLs, comma-separated")
    return list(dict.fromkeys(urls))


def ask_all(
    args: argparse.Namespace, ask: Callable[[AdminClient], T], timeout: float = 30.0
) -> tuple[list[tuple[str, T]], bool]:
    """Each replica's answer (in the order given) and whether every replica answered."""
    from collector.cli._client import AdminClient

    urls = replicas(args)

    def one(url: str) -> tuple[str, T | Exception]:
        try:
            return url, ask(AdminClient(url, args.token, timeout=timeout))
        except Exception as exc:  # reported below, per replica
            return url, exc

    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as pool:
        answers = list(pool.map(one, urls))
    good: list[tuple[str, Any]] = []
    for url, answer in answers:
        if isinstance(answer, Exception):
            print(f"sextant: replica {replica_name(url)} did not answer: {answer}", file=sys.stderr)
        else:
            good.append((replica_name(url), answer))
    return good, len(good) == len(answers)
