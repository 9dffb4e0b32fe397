"""Incident replay: stored trajectories re-evaluated, re-sent, exported as cases and evidence."""
