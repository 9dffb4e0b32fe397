"""Pure evaluators of agent trajectories: no I/O, no imports from `collector`."""
