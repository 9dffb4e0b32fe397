"""The MCP inventory counts a server's tools appearing after its first sighting and
disappearing from its listings, never the first sighting itself; it keeps each service's
servers apart, within a bound per service."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from collector.evaluation.mcp import McpInventory, Sightings
from tests.support.trajectories import run, step, tool


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def changes(registry: CollectorRegistry, server: str, change: str, service: str = "desk"):
    return value(
        registry,
        "sextant_mcp_tool_changes_total",
        service=service,
        mcp_server=server,
        change=change,
    )


def tools(registry: CollectorRegistry, server: str, service: str = "desk") -> float | None:
    return value(registry, "sextant_mcp_server_tools", service=service, mcp_server=server)


def test_tools_appearing_and_disappearing_after_the_first_sighting() -> None:
    registry = CollectorRegistry()
    inventory = McpInventory(registry)
    crm = ("desk", "crm")
    inventory.record(Sightings({crm: {"lookup", "update"}}, {crm: (1, {"lookup", "update"})}))
    assert tools(registry, "crm") == 2
    assert changes(registry, "crm", "appeared") == 0
    # A call of a tool never seen on it: appeared.
    inventory.record(Sightings({crm: {"export_contacts"}}))
    assert changes(registry, "crm", "appeared") == 1
    assert tools(registry, "crm") == 3
    # A listing without two of them: disappeared, and the gauge follows the listing.
    inventory.record(Sightings({crm: {"lookup"}}, {crm: (2, {"lookup"})}))
    assert changes(registry, "crm", "disappeared") == 2
    assert tools(registry, "crm") == 1
    # Another server's first sighting changes nothing on either.
    inventory.record(Sightings({("desk", "billing"): {"refund"}}))
    assert changes(registry, "billing", "appeared") == 0


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
    shown = {
        s.labels["mcp_server"]
        for m in registry.collect()
        for s in m.samples
        if "mcp_server" in s.labels
    }
    assert shown == {"crm"}


def test_made_up_servers_of_one_service_neither_hide_another_service_nor_stay() -> None:
    """Two hundred made-up names from one service: the other service's server keeps its
    baseline (its change is counted); the flooding service keeps only its newest few, and the
    real server it sees on every run stays among them."""
    registry = CollectorRegistry()
    inventory = McpInventory(registry, per_service=5)
    crm = ("desk", "crm")
    inventory.record(Sightings({crm: {"lookup", "update"}}, {crm: (1, {"lookup", "update"})}))
    for i in range(200):
        inventory.record(Sightings({("noisy", f"made-up-{i}"): {"x"}, ("noisy", "real"): {"y"}}))
    inventory.record(Sightings({crm: {"lookup"}}, {crm: (2, {"lookup"})}))
    assert changes(registry, "crm", "disappeared") == 1
    assert tools(registry, "real", "noisy") == 1
    assert tools(registry, "made-up-0", "noisy") is None  # forgotten, label gone
    assert tools(registry, "made-up-199", "noisy") == 1
    forgotten = value(registry, "sextant_mcp_inventory_dropped_total", reason="server_forgotten")
    assert forgotten == 200 - 4


def listing(names: list[str]) -> dict:
    return {"method": "tools/list", "server": "crm", "tools": names}


def test_listings_count_in_the_order_they_were_made_not_closed() -> None:
    """One round closes the upgraded server's shorter listing before the earlier one; an
    earlier listing closed in a later round changes nothing either."""
    registry = CollectorRegistry()
    inventory = McpInventory(registry)
    first = step(1, "other", "tools/list.mcp", mcp=listing(["a", "b"]))
    later = step(5, "other", "tools/list.mcp", mcp=listing(["a"]))
    sightings = Sightings()
    for listed in (later, first):
        t = run(listed)
        t.service_name = "desk"
        sightings.count(t)
    inventory.record(sightings)
    assert changes(registry, "crm", "disappeared") == 1
    assert tools(registry, "crm") == 1
    stale = Sightings()
    t = run(first)
    t.service_name = "desk"
    stale.count(t)
    inventory.record(stale)
    assert changes(registry, "crm", "disappeared") == 1
