"""The runtime guard: an agent asks before a consequential tool call (docs/guard.md)."""
