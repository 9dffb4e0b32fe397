"""The tools each MCP server has been seen to offer, and when that changes: a tool appearing
on a server (called or listed for the first time) or disappearing from it (a `tools/list`
answer no longer naming a tool an earlier one named).

A changed tool set is how a compromised or upgraded MCP server shows itself to the agents that
use it. Only named servers are kept: calls whose trace does not name their server would pool
every such server's tools into one set that "changes" whenever two of them are listed. The
inventory lives in memory: after a restart, the first sighting of each server is its new
baseline and counts no change.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from evaluators.model import Trajectory

MAX_SERVERS = 200  # past it, new servers are not kept (a label per server is bounded)


@dataclass
class Sightings:
    """What a round saw of MCP servers: tools called or listed, and whole listings."""

    tools: dict[str, set[str]] = field(default_factory=dict)
    listings: dict[str, set[str]] = field(default_factory=dict)

    def count(self, t: Trajectory) -> None:
        for s in t.steps:
            if s.mcp is None:
                continue
            server = s.mcp.get("server")
            if not server:
                continue
            server = str(server)
            if s.is_tool_call and s.tool_name:
                self.tools.setdefault(server, set()).add(s.tool_name)
            listed = s.mcp.get("tools")
            if s.mcp.get("method") == "tools/list" and isinstance(listed, list):
                self.listings[server] = {str(name) for name in listed}
                self.tools.setdefault(server, set()).update(self.listings[server])


class McpInventory:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.known = Gauge(
            "sextant_mcp_server_tools",
            "Tools an MCP server has been seen to offer (called or listed) since the start.",
            ["mcp_server"],
            registry=registry,
        )
        self.changes = Counter(
            "sextant_mcp_tool_changes",
            "Tools appearing on or disappearing from an MCP server after it was first seen.",
            ["mcp_server", "change"],
            registry=registry,
        )
        self._tools: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def record(self, seen: Sightings) -> None:
        with self._lock:
            for server, tools in seen.tools.items():
                if server not in self._tools and len(self._tools) >= MAX_SERVERS:
                    continue
                known = self._tools.get(server)
                if known is None:
                    self._tools[server] = set(tools)
                    for change in ("appeared", "disappeared"):  # at 0: `increase()` sees the first
                        self.changes.labels(server, change)
                else:
                    self.changes.labels(server, "appeared").inc(len(tools - known))
                    known |= tools
                self.known.labels(server).set(len(self._tools[server]))
            for server, listed in seen.listings.items():
                if server not in self._tools:
                    continue
                gone = self._tools[server] - listed
                if gone:
                    self.changes.labels(server, "disappeared").inc(len(gone))
                    self._tools[server] = set(listed)
                    self.known.labels(server).set(len(listed))
