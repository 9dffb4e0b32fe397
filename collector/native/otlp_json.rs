//! OTLP/JSON export requests to the same protobuf messages the binary encoding decodes to.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// An OTLP/JSON ExportTraceServiceRequest; `ignored` gets the top-level keys that are not the
/// request's (sorted). The error is the whole message the client is told.
pub fn traces_from_json(
    body: &[u8],
    ignored: &mut Vec<String>,
) -> Result<ExportTraceServiceRequest, String> {
    let _ = (body, ignored);
    todo!("port of collector/normalize/otlp_json.py")
}

/// An OTLP/JSON ExportLogsServiceRequest, as `traces_from_json`.
pub fn logs_from_json(
    body: &[u8],
    ignored: &mut Vec<String>,
) -> Result<ExportLogsServiceRequest, String> {
    let _ = (body, ignored);
    todo!("port of collector/normalize/otlp_json.py")
}
