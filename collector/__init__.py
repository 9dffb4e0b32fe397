"""Sextant: an OpenTelemetry trace collector and online evaluator for AI agents."""

__version__ = "0.1.0"
