"""The MCP inventory counts a server's tools appearing after its first sighting and
disappearing from its listings, never the first sighting itself."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from collector.evaluation.mcp import McpInventory, Sightings
from tests.support.trajectories import run, tool


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_tools_appearing_and_disappearing_after_the_first_sighting() -> None:
    registry = CollectorRegistry()
    inventory = McpInventory(registry)
    inventory.record(Sightings({"crm": {"lookup", "update"}}, {"crm": {"lookup", "update"}}))
    assert value(registry, "sextant_mcp_server_tools", mcp_server="crm") == 2
    assert (
        value(registry, "sextant_mcp_tool_changes_total", mcp_server="crm", change="appeared") == 0
    )
    # A call of a tool never seen on it: appeared.
    inventory.record(Sightings({"crm": {"export_contacts"}}))
    assert (
        value(registry, "sextant_mcp_tool_changes_total", mcp_server="crm", change="appeared") == 1
    )
    assert value(registry, "sextant_mcp_server_tools", mcp_server="crm") == 3
    # A listing without two of them: disappeared, and the gauge follows the listing.
    inventory.record(Sightings({"crm": {"lookup"}}, {"crm": {"lookup"}}))
    gone = value(registry, "sextant_mcp_tool_changes_total", mcp_server="crm", change="disappeared")
    assert gone == 2
    assert value(registry, "sextant_mcp_server_tools", mcp_server="crm") == 1
    # Another server's first sighting changes nothing on either.
    inventory.record(Sightings({"billing": {"refund"}}))
    assert (
        value(registry, "sextant_mcp_tool_changes_total", mcp_server="billing", change="appeared")
        == 0
    )


def test_calls_to_servers_the_trace_does_not_name_are_not_pooled() -> None:
    registry = CollectorRegistry()
    inventory = McpInventory(registry)
    sightings = Sightings()
    t = run(
        tool(1, "a1", mcp={"method": "tools/call"}),
        tool(2, "b1", mcp={"method": "tools/call"}),
        tool(3, "c1", mcp={"method": "tools/call", "server": "crm"}),
    )
    sightings.count(t)
    inventory.record(sightings)
    assert value(registry, "sextant_mcp_server_tools", mcp_server="crm") == 1
    shown = {
        s.labels["mcp_server"]
        for m in registry.collect()
        for s in m.samples
        if "mcp_server" in s.labels
    }
    assert shown == {"crm"}
