"""Replicas among replicas: how answers name them, which configured peers are others, and
asking a peer: one definition for the command line's `--cluster`, the console and the drift
scheduler's resharding check."""

from __future__ import annotations

import urllib.request
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from collector.outbound import opener

if TYPE_CHECKING:  # the command line imports this module; the config (and gRPC) stays unloaded
    from collector.config.auth import AuthConfig
    from collector.config.sections import ClusterConfig


def replica_name(url: str) -> str:
    """A replica in answers joined from several: host:port of its admin URL (never a
    `user:password@` in it)."""
    return urlsplit(url).netloc.rpartition("@")[2] or url


def other_peers(peers: list[str], replica: str | None) -> list[str]:
    """The peers that are not this replica: one list serves every pod of a StatefulSet, so it
    names this one too (`sextant-1.sextant-replicas...` is `sextant-1`), which would count its
    rows twice."""
    if replica is None:
        return list(peers)
    return [p for p in peers if (urlsplit(p).hostname or "").split(".")[0] != replica]


def peer_token(cluster: ClusterConfig, auth: AuthConfig) -> str | None:
    """The token this replica presents to the other replicas' admin APIs."""
    token = cluster.peer_token or next(iter(auth.secrets), None)
    return token.get_secret_value() if token else None


def peer_rows(
    url: str, token: str | None, sql: str, params: list[Any], timeout: float = 10.0
) -> list[dict[str, Any]]:
    """One read-only query on a peer's `POST /api/v1/sql`; raises OSError when it does not
    answer and ValueError when its answer is not the SQL API's."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = orjson.dumps({"sql": sql, "params": params, "format": "json"}, default=str)
    request = urllib.request.Request(url.rstrip("/") + "/api/v1/sql", body, headers)
    with opener().open(request, timeout=timeout) as reply:
        doc = orjson.loads(reply.read())
    try:
        names = [c["name"] for c in doc["columns"]]
        return [dict(zip(names, row, strict=True)) for row in doc["rows"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{url}: not an answer of the SQL API") from exc
