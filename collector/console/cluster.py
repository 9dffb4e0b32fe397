"""The SQL page's "every replica": the same read-only query asked of each peer's
`POST /api/v1/sql` (its own sandbox and limits), the answers joined with the replica each
came from. A peer that does not answer is named on the page, never left out in silence."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from collector.cluster import replica_name

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
    name = replica_name(url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"sql": sql, "max_rows": max_rows, "format": "json"}
    try:
        async with session.post(
            url.rstrip("/") + "/api/v1/sql", json=body, headers=headers
        ) as reply:
            doc = await reply.json(content_type=None)
            if reply.status != 200:
                error = doc.get("error") if isinstance(doc, dict) else None
                return PeerAnswer(name, error=f"HTTP {reply.status}: {error or 'no answer'}")
            return PeerAnswer(
                name,
                [c["name"] for c in doc["columns"]],
                list(doc["rows"]),
                doc.get("truncated_by") or ("max_rows" if doc.get("truncated") else None),
            )
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
        # a dead address, a timeout, or a 200 that is not the SQL API's answer
        return PeerAnswer(name, error=f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc))


async def ask_peers(
    peers: list[str], token: str | None, sql: str, max_rows: int
) -> list[PeerAnswer]:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        return list(
            await asyncio.gather(*(ask_peer(session, p, token, sql, max_rows) for p in peers))
        )
