"""The SQL page's "every replica": the same read-only query asked of each peer's
`POST /api/v1/sql` (its own sandbox and limits), the answers joined with the replica each
came from. A peer that does not answer is named on the page, never left out in silence."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from collector.cluster import replica_name
from collector.outbound import CrossOriginRedirect, same_origin_target
from collector.redact import redact

TIMEOUT_SECONDS = 60.0


@dataclass
class PeerAnswer:
    replica: str
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    truncated_by: str | None = None
    error: str | None = None


async def ask_peer(
    session: aiohttp.ClientSession, url: str, token: str | None, sql: str, max_rows: int
) -> PeerAnswer:
    """The peer's answer, or why there is none (its error text without credentials). A
    redirect is not followed: a peer that sends the query elsewhere has not answered."""
    name = replica_name(url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"sql": sql, "max_rows": max_rows, "format": "json"}
    endpoint = url.rstrip("/") + "/api/v1/sql"
    try:
        async with session.post(
            endpoint, json=body, headers=headers, allow_redirects=False
        ) as reply:
            if 300 <= reply.status < 400:
                location = reply.headers.get("Location")
                same_origin_target(endpoint, location, reply.status)
                raise ValueError(f"HTTP {reply.status} redirects to {location}; not followed")
            doc = await reply.json(content_type=None)
            if reply.status != 200:
                error = doc.get("error") if isinstance(doc, dict) else None
                return failed(name, f"HTTP {reply.status}: {error or 'no answer'}", token)
            return PeerAnswer(
                name,
                [c["name"] for c in doc["columns"]],
                list(doc["rows"]),
                doc.get("truncated_by") or ("max_rows" if doc.get("truncated") else None),
            )
    except CrossOriginRedirect as exc:
        return failed(name, str(exc), token)
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
        # a dead address, a timeout, or a 200 that is not the SQL API's answer
        return failed(name, f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc), token)


def failed(name: str, error: str, token: str | None) -> PeerAnswer:
    return PeerAnswer(name, error=redact(error, [token]))


async def ask_peers(
    peers: list[str], token: str | None, sql: str, max_rows: int
) -> list[PeerAnswer]:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        return list(
            await asyncio.gather(*(ask_peer(session, p, token, sql, max_rows) for p in peers))
        )
