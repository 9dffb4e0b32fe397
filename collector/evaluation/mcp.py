"""The tools each MCP server has been seen to offer, and when that changes: a tool appearing
on a server (called or listed for the first time) or disappearing from it (a `tools/list`
answer no longer naming a tool an earlier one named).

A changed tool set is how a compromised or upgraded MCP server shows itself to the agents that
use it. The inventory is kept per service (the agents' service.name) and per server as the
trace names it (the server's own name when its spans are there): one service's telemetry can
neither fill nor rewrite another's inventory. Calls whose trace does not name their server are
not kept: they would pool every such server's tools into one set that "changes" whenever two
of them are listed.

Bounds: `MAX_SERVERS_PER_SERVICE` servers per service, the one seen least recently forgotten
for a new one (a real server is seen on every run, made-up names once); `MAX_SERVICES`
services, a new one past it not kept. Both are counted in `sextant_mcp_inventory_dropped`.
The inventory lives in the store (`mcp_servers`), so a restart goes on from what it knew.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from collector.clock import Clock, SystemClock
from collector.store.database import Database
from collector.store.tables import rows_table
from collector.store.writer import Writer
from evaluators.model import Trajectory

log = logging.getLogger(__name__)

MAX_SERVERS_PER_SERVICE = 50
MAX_SERVICES = 1000
CHANGES = ("appeared", "disappeared")

Key = tuple[str, str]  # (service, server)


@dataclass
class Sightings:
    """What a round saw of MCP servers, per (service, server): tools called or listed, and
    the newest whole listing (its time, its tools): a round may close two listings of one
    server in any order."""

    tools: dict[Key, set[str]] = field(default_factory=dict)
    listings: dict[Key, tuple[int, set[str]]] = field(default_factory=dict)

    def count(self, t: Trajectory) -> None:
        service = t.service_name or ""
        for s in t.steps:
            if s.mcp is not None:
                tool = s.tool_name if s.is_tool_call else None
                self.count_step(service, s.mcp, tool, s.start_time_unix_nano)

    def count_step(
        self, service: str, mcp: dict[str, Any], tool: str | None, start_time_unix_nano: int
    ) -> None:
        """One step's MCP facts; `tool` is the tool it calls, if it is a tool call."""
        if not mcp.get("server"):
            return
        key = (service, str(mcp["server"]))
        if tool:
            self.tools.setdefault(key, set()).add(tool)
        listed = mcp.get("tools")
        if mcp.get("method") == "tools/list" and isinstance(listed, list):
            names = {str(name) for name in listed}
            self.tools.setdefault(key, set()).update(names)
            if key not in self.listings or start_time_unix_nano >= self.listings[key][0]:
                self.listings[key] = (start_time_unix_nano, names)


@dataclass
class Known:
    tools: set[str]
    first_seen: datetime
    last_seen: datetime
    listed_at: int = 0  # start of the newest listing applied (ns): an older one changes nothing


class McpInventory:
    """The inventory, its metrics, and its rows in the store (loaded at start, a service's
    rows written again whenever one of its servers changes)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        database: Database | None = None,
        writer: Writer | None = None,
        clock: Clock | None = None,
        per_service: int = MAX_SERVERS_PER_SERVICE,
        services: int = MAX_SERVICES,
    ) -> None:
        self.database = database
        self.writer = writer
        self.clock = clock or SystemClock()
        self.per_service = per_service
        self.max_services = services
        self.known = Gauge(
            "sextant_mcp_server_tools",
            "Tools an MCP server has been seen to offer to a service's runs (called or listed).",
            ["service", "mcp_server"],
            registry=registry,
        )
        self.changes = Counter(
            "sextant_mcp_tool_changes",
            "Tools appearing on or disappearing from an MCP server after it was first seen.",
            ["service", "mcp_server", "change"],
            registry=registry,
        )
        self.dropped = Counter(
            "sextant_mcp_inventory_dropped",
            "MCP servers the inventory let go: forgotten for a newer one of the same service"
            " (server_forgotten), or not kept because too many services are (service_refused).",
            ["reason"],
            registry=registry,
        )
        for reason in ("server_forgotten", "service_refused"):
            self.dropped.labels(reason)
        self._servers: dict[str, OrderedDict[str, Known]] = {}  # least recently seen first
        self._lock = threading.Lock()

    def start(self) -> None:
        """Loads what the store holds: the first sighting after a restart is no baseline."""
        if self.database is None:
            return
        rows = self.database.read(
            lambda cur: cur.execute(
                "SELECT service_name, server, tools, first_seen, last_seen FROM mcp_servers"
                " ORDER BY service_name, last_seen, server"
            ).fetchall()
        )
        with self._lock:
            for service, server, tools, first, last in rows:
                servers = self._servers.setdefault(service, OrderedDict())
                servers[server] = Known(set(tools), first, last)
                self._show(service, server, len(tools))

    def shutdown(self, deadline: float) -> None:
        pass

    def threads(self) -> list[threading.Thread]:
        return []

    def _get(self, service: str, server: str) -> Known | None:
        servers = self._servers.get(service)
        return servers.get(server) if servers is not None else None

    def record(self, seen: Sightings) -> None:
        now = self.clock.now()
        changed: set[str] = set()
        with self._lock:
            for (service, server), tools in seen.tools.items():
                known = self._get(service, server)
                if known is None:
                    if self._add(service, server, Known(set(tools), now, now)):
                        changed.add(service)
                    continue
                new = tools - known.tools
                if new:
                    self.changes.labels(service, server, "appeared").inc(len(new))
                    known.tools |= new
                    self.known.labels(service, server).set(len(known.tools))
                    changed.add(service)
                known.last_seen = now
                self._servers[service].move_to_end(server)
            for (service, server), (at, listed) in seen.listings.items():
                known = self._get(service, server)
                if known is None or at < known.listed_at:
                    continue
                known.listed_at = at
                gone = known.tools - listed
                if gone:
                    self.changes.labels(service, server, "disappeared").inc(len(gone))
                    known.tools = set(listed)
                    self.known.labels(service, server).set(len(listed))
                    changed.add(service)
            rows = [row for service in sorted(changed) for row in self._rows(service)]
        if rows and self.writer is not None:
            try:
                self.writer.submit_tables({"mcp_servers": rows_table("mcp_servers", rows)})
            except Exception as exc:  # the next change of the service writes it whole again
                log.warning("MCP inventory not stored this round: %s", exc)

    def _add(self, service: str, server: str, known: Known) -> bool:
        servers = self._servers.get(service)
        if servers is None:
            if len(self._servers) >= self.max_services:
                self.dropped.labels("service_refused").inc()
                return False
            servers = self._servers[service] = OrderedDict()
        if len(servers) >= self.per_service:
            old, _ = servers.popitem(last=False)
            self.known.remove(service, old)
            for change in CHANGES:
                self.changes.remove(service, old, change)
            self.dropped.labels("server_forgotten").inc()
        servers[server] = known
        self._show(service, server, len(known.tools))
        return True

    def _show(self, service: str, server: str, tools: int) -> None:
        self.known.labels(service, server).set(tools)
        for change in CHANGES:  # at 0: `increase()` sees the first change
            self.changes.labels(service, server, change)

    def _rows(self, service: str) -> list[dict[str, Any]]:
        return [
            {
                "service_name": service,
                "server": server,
                "tools": sorted(known.tools),
                "first_seen": known.first_seen,
                "last_seen": known.last_seen,
            }
            for server, known in self._servers[service].items()
        ]
