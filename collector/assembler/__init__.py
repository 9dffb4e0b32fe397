"""Trajectory assembly: per-trace buffers, the close policy, and building runs from spans."""
