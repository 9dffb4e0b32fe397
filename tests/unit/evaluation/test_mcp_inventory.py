"""The MCP inventory counts a server's tools appearing after its first sighting and
disappearing from its listings, never the first sighting itself."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from collector.evaluation.mcp import McpInventory, Sightings


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
