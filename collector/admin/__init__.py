"""The admin HTTP API: metrics, health and (later) SQL, trajectories and decisions."""
