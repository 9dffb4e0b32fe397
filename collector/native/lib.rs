//! Sextant's native hot path, a Python extension module (`collector.normalize._native`): one
//! OTLP export request's bytes to the Arrow columns of the store's `spans` or `logs` batch.

mod arrow_py;
mod assemble;
mod attr_list;
mod attributes;
mod columns;
mod decoded;
mod distinct_rows;
mod fresh_copy;
mod grpc_load;
mod grpc_server;
mod guard_answer;
mod guard_judge;
mod guard_listen;
mod http_load;
mod http_server;
mod json;
mod lenient;
mod listener;
mod load_schedule;
mod logs;
mod otlp_json;
mod python;
mod raw_codec;
mod rules;
mod rules_casefold;
mod rules_eval;
mod rules_flow;
mod rules_keywords;
mod rules_pack;
mod rules_precedes;
mod rules_regex;
mod rules_retrieval;
mod rules_value;
mod semconv;
mod span_keys;
mod spans;
mod unicode;

use std::borrow::Cow;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_py::ArrowBatch;
use pyo3::types::{PyBytes, PyDict};

use crate::columns::TooLarge;
use crate::decoded::{Counts, Decoded, Semconv};
use crate::lenient::{lenient, Msg};

/// Rust's allocations (the decoded request, the columns) come from mimalloc: a request is a few
/// dozen small strings per span, allocated and freed at about half glibc's cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Why a request could not be decoded: the whole message the client is told.
#[derive(Debug, PartialEq)]
pub struct Malformed(pub String);

impl From<TooLarge> for Malformed {
    fn from(e: TooLarge) -> Self {
        Malformed(format!(
            "request decodes to more than 2 GiB of {} text; send fewer items per request",
            e.0
        ))
    }
}

/// A protobuf request, read as Python's protobuf (upb) reads it.
///
/// Bytes prost reads and would write back at the same length are taken as they are: each
/// difference `lenient` handles either makes prost fail (a mistyped field, an overlong varint)
/// or lengthens the bytes past prost's canonical form (a field prost drops, a padded tag or
/// length), so only other bytes are walked by `lenient`. (Only hand-made bytes can hide a
/// padded tag behind something prost writes longer, such as a negative int32 sent in 5 bytes.)
fn protobuf<M: Message + Default>(data: &[u8], root: Msg) -> Result<M, Malformed> {
    let name = match root {
        Msg::LogsRequest => "ExportLogsServiceRequest",
        _ => "ExportTraceServiceRequest",
    };
    let refused = |detail: &dyn std::fmt::Display| {
        Malformed(format!(
            "request body is not a valid {name} protobuf: {detail}"
        ))
    };
    let first = M::decode(data);
    if matches!(&first, Ok(m) if m.encoded_len() == data.len()) {
        return first.map_err(|e| refused(&e));
    }
    match lenient(data, root).map_err(|why| refused(&why))? {
        Cow::Borrowed(_) => first.map_err(|e| refused(&e)),
        Cow::Owned(repaired) => M::decode(&*repaired).map_err(|e| refused(&e)),
    }
}

/// Parses and normalizes one request (no Python involved: runs with the GIL released).
pub fn decode_bytes(
    signal: &str,
    encoding: &str,
    data: &[u8],
    max_attribute_length: usize,
    ignored: &mut Vec<String>,
) -> Result<Decoded, Malformed> {
    match (signal, encoding) {
        ("traces", "protobuf") => {
            let request = protobuf::<ExportTraceServiceRequest>(data, Msg::TraceRequest)?;
            Ok(spans::decode_spans(
                request,
                max_attribute_length,
                data.len(),
                &Semconv,
            )?)
        }
        ("traces", "json") => {
            let request = otlp_json::traces_from_json(data, ignored).map_err(Malformed)?;
            Ok(spans::decode_spans(
                request,
                max_attribute_length,
                data.len(),
                &Semconv,
            )?)
        }
        ("logs", "protobuf") => {
            let request = protobuf::<ExportLogsServiceRequest>(data, Msg::LogsRequest)?;
            Ok(logs::decode_logs(
                request,
                max_attribute_length,
                data.len(),
                &Semconv,
            )?)
        }
        ("logs", "json") => {
            let request = otlp_json::logs_from_json(data, ignored).map_err(Malformed)?;
            Ok(logs::decode_logs(
                request,
                max_attribute_length,
                data.len(),
                &Semconv,
            )?)
        }
        ("traces" | "logs", _) => Err(Malformed(format!("unknown encoding {encoding:?}"))),
        _ => Err(Malformed(format!("unknown signal {signal:?}"))),
    }
}

fn counts<'py>(py: Python<'py>, counts: Counts) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, count) in counts.0 {
        dict.set_item(name, count)?;
    }
    Ok(dict)
}

type DecodeResult<'py> = (
    Option<ArrowBatch>,
    usize,
    Bound<'py, PyDict>,
    usize,
    Bound<'py, PyDict>,
    Vec<String>,
);

/// Decodes one OTLP export request: `(batch | None, rows, rejected, truncated_rows,
/// rejected_by_service, ignored)`. Raises ValueError with the client-facing message when the
/// bytes are not a request (or the signal or encoding is unknown).
#[pyfunction]
fn decode<'py>(
    py: Python<'py>,
    signal: &str,
    encoding: &str,
    data: &Bound<'py, PyBytes>,
    max_attribute_length: usize,
) -> PyResult<DecodeResult<'py>> {
    let bytes = data.as_bytes();
    let (signal, encoding) = (signal.to_owned(), encoding.to_owned());
    // `bytes` borrows an immutable `bytes` object the caller keeps alive for the whole call.
    let (result, ignored) = py.detach(move || {
        let mut ignored = Vec::new();
        let result = decode_bytes(
            &signal,
            &encoding,
            bytes,
            max_attribute_length,
            &mut ignored,
        )
        .map(|mut decoded| {
            let batch = decoded.batch.take().map(ArrowBatch::new);
            (decoded, batch)
        });
        (result, ignored)
    });
    let (decoded, batch) = result.map_err(|e| PyValueError::new_err(e.0))?;
    Ok((
        batch,
        decoded.rows,
        counts(py, decoded.rejected)?,
        decoded.truncated_rows,
        counts(py, decoded.rejected_by_service)?,
        ignored,
    ))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_class::<ArrowBatch>()?;
    m.add_class::<grpc_server::GrpcServer>()?;
    m.add_class::<http_server::HttpServer>()?;
    m.add_class::<fresh_copy::FreshCopies>()?;
    m.add_function(wrap_pyfunction!(grpc_load::grpc_load, m)?)?;
    m.add_function(wrap_pyfunction!(http_load::http_load, m)?)?;
    m.add_class::<span_keys::SpanKeys>()?;
    m.add_function(wrap_pyfunction!(distinct_rows::distinct_rows, m)?)?;
    m.add_function(wrap_pyfunction!(rules::compile_pack, m)?)?;
    m.add_function(wrap_pyfunction!(rules::evaluate_packs, m)?)?;
    m.add_function(wrap_pyfunction!(rules::regex_set_matches, m)?)?;
    m.add_class::<rules::NativePack>()?;
    m.add_class::<guard_judge::GuardRuns>()?;
    m.add_function(wrap_pyfunction!(guard_listen::guard_call_read, m)?)?;
    assemble::register(m)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_protobuf_names_the_message_type() {
        let mut ignored = Vec::new();
        let err = decode_bytes("traces", "protobuf", b"\xff\xff", 10, &mut ignored).unwrap_err();
        assert!(
            err.0
                .starts_with("request body is not a valid ExportTraceServiceRequest protobuf: "),
            "{}",
            err.0
        );
        let err = decode_bytes("logs", "protobuf", b"\x0a\x05", 10, &mut ignored).unwrap_err();
        assert!(
            err.0
                .starts_with("request body is not a valid ExportLogsServiceRequest protobuf: "),
            "{}",
            err.0
        );
    }

    fn trace_request(span: &[u8]) -> Vec<u8> {
        let wrap = |num: u8, payload: &[u8]| {
            let mut out = vec![num << 3 | 2, payload.len() as u8];
            out.extend_from_slice(payload);
            out
        };
        wrap(1, &wrap(2, &wrap(2, span)))
    }

    fn ids() -> Vec<u8> {
        let mut span = vec![0x0a, 16];
        span.extend([1; 16]);
        span.extend([0x12, 8]);
        span.extend([2; 8]);
        span
    }

    #[test]
    fn canonical_bytes_read_as_prost_reads_them() {
        let mut span = ids();
        span.extend([0x2a, 1, b'n']);
        let data = trace_request(&span);
        let request = protobuf::<ExportTraceServiceRequest>(&data, Msg::TraceRequest).unwrap();
        assert_eq!(request.encoded_len(), data.len());
        assert_eq!(request.resource_spans[0].scope_spans[0].spans[0].name, "n");
    }

    #[test]
    fn padded_tag_prost_reads_is_refused_as_upb_does() {
        let mut span = ids();
        span.extend([0xaa, 0x80, 0x80, 0x80, 0x80, 0x00, 1, b'n']);
        let data = trace_request(&span);
        assert!(ExportTraceServiceRequest::decode(&*data).is_ok());
        let err = protobuf::<ExportTraceServiceRequest>(&data, Msg::TraceRequest).unwrap_err();
        assert_eq!(
            err.0,
            "request body is not a valid ExportTraceServiceRequest protobuf: a tag or length \
             longer than 5 bytes"
        );
    }

    #[test]
    fn mistyped_field_prost_refuses_reads_as_unset() {
        let mut span = ids();
        span.extend([0x28, 1]);
        let data = trace_request(&span);
        assert!(ExportTraceServiceRequest::decode(&*data).is_err());
        let request = protobuf::<ExportTraceServiceRequest>(&data, Msg::TraceRequest).unwrap();
        assert_eq!(request.resource_spans[0].scope_spans[0].spans[0].name, "");
    }

    #[test]
    fn unknown_fields_keep_prost_reading() {
        let mut span = ids();
        span.extend([0xf8, 0x01, 7]);
        let data = trace_request(&span);
        let request = protobuf::<ExportTraceServiceRequest>(&data, Msg::TraceRequest).unwrap();
        assert!(request.encoded_len() < data.len());
        assert_eq!(
            request.resource_spans[0].scope_spans[0].spans[0].span_id,
            [2; 8]
        );
    }

    #[test]
    fn unknown_signal_or_encoding_is_refused() {
        let mut ignored = Vec::new();
        assert_eq!(
            decode_bytes("metrics", "protobuf", b"", 10, &mut ignored).unwrap_err(),
            Malformed("unknown signal \"metrics\"".into())
        );
        assert_eq!(
            decode_bytes("traces", "xml", b"", 10, &mut ignored).unwrap_err(),
            Malformed("unknown encoding \"xml\"".into())
        );
    }

    #[test]
    fn empty_protobuf_is_an_empty_request() {
        let mut ignored = Vec::new();
        let out = decode_bytes("traces", "protobuf", b"", 10, &mut ignored).unwrap();
        assert!(out.batch.is_none());
        assert_eq!(out.rows, 0);
        let out = decode_bytes("logs", "protobuf", b"", 10, &mut ignored).unwrap();
        assert!(out.batch.is_none());
    }

    #[test]
    fn too_large_message_names_the_column() {
        let e: Malformed = TooLarge("attributes").into();
        assert!(e.0.contains("2 GiB of attributes text"), "{}", e.0);
    }
}
