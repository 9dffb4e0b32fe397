"""Turn decoded OTLP messages into column arrays ready for the store."""
