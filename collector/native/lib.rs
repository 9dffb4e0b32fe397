//! Sextant's native hot path, a Python extension module (`collector._native`).

mod otlp_json;
mod semconv;
