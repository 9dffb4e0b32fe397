"""The Python decoder that the native one (collector.normalize._native) replaced, kept as the
reference the differential tests compare the native decoder with: protobuf's own parse of a
request (and the field-by-field OTLP/JSON reader) followed by the normalization as it was written
in Python. Not used by the product."""
