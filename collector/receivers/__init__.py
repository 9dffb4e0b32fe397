"""OTLP receivers: decode, authenticate, limit, hand to ingest, answer per the OTLP spec."""
