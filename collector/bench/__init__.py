"""`sextant bench`: a load generator for any OTLP endpoint."""
