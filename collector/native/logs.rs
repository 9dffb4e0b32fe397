//! ExportLogsServiceRequest to the columns of the store's `logs` batch.

use std::mem::take;
use std::sync::Arc;

use arrow_array::types::{Int32Type, UInt32Type, UInt64Type};
use arrow_array::ArrayRef;
use arrow_schema::{DataType, Fields};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::logs::v1::LogRecord;

use crate::attributes::Reader;
use crate::columns::{fields, str_list, struct_array, PrimCol, StrListCol, TooLarge, Utf8Col};
use crate::decoded::{resource_text, Decoded, Semantics};
use crate::json;
use crate::semconv::Attrs;

/// The `logs` batch schema, in the store's column order.
pub fn log_fields() -> Fields {
    use DataType::{Int32, UInt32, UInt64, Utf8};
    fields(&[
        ("trace_id", Utf8),
        ("span_id", Utf8),
        ("time_unix_nano", UInt64),
        ("observed_time_unix_nano", UInt64),
        ("severity_number", Int32),
        ("severity_text", Utf8),
        ("event_name", Utf8),
        ("body", Utf8),
        ("attributes", Utf8),
        ("flags", UInt32),
        ("dropped_attributes_count", UInt32),
        ("resource_attributes", Utf8),
        ("scope_name", Utf8),
        ("scope_version", Utf8),
        ("service_name", Utf8),
        ("truncated_attributes", str_list()),
    ])
}

/// Columns for every valid log record of `request`; `wire_bytes` is the size of the request's
/// body (about as long as the bodies' and attributes' text). Records are checked by id length only (a
/// log need not belong to a span), and their rejections are not counted by service.
pub fn decode_logs<S: Semantics>(
    request: ExportLogsServiceRequest,
    max_attribute_length: usize,
    wire_bytes: usize,
    sem: &S,
) -> Result<Decoded, TooLarge> {
    let total: usize = request
        .resource_logs
        .iter()
        .flat_map(|rl| &rl.scope_logs)
        .map(|sl| sl.log_records.len())
        .sum();
    let mut cols = LogColumns::with_capacity(total, wire_bytes);
    let mut out = Decoded::default();
    let mut reader = Reader::new(max_attribute_length);
    let mut attrs = Attrs::new();
    for rl in request.resource_logs {
        reader.truncated.clear();
        let res_kvs = rl.resource.map(|r| r.attributes).unwrap_or_default();
        let res_attrs = reader.attributes(res_kvs);
        let res_json = json::map_text(&res_attrs);
        let service_name = resource_text(sem, &res_attrs, "service.name");
        drop(res_attrs);
        let shared = take(&mut reader.truncated);
        for sl in rl.scope_logs {
            let scope = sl.scope.unwrap_or_default();
            cols.resource_attributes
                .reserve(res_json.len() * sl.log_records.len());
            for record in sl.log_records {
                if !matches!(record.trace_id.len(), 0 | 16) {
                    out.rejected.add("invalid_trace_id");
                    continue;
                }
                if !matches!(record.span_id.len(), 0 | 8) {
                    out.rejected.add("invalid_span_id");
                    continue;
                }
                reader.truncated.clear();
                cols.push(record, &mut reader, &mut attrs);
                cols.resource_attributes.push(&res_json);
                cols.scope_name.push_or_null(&scope.name);
                cols.scope_version.push_or_null(&scope.version);
                cols.service_name.push_opt(service_name.as_deref());
                cols.truncated_attributes
                    .push_or_null(shared.iter().chain(&reader.truncated).map(String::as_str));
                if !shared.is_empty() || !reader.truncated.is_empty() {
                    out.truncated_rows += 1;
                }
                out.rows += 1;
            }
        }
    }
    if out.rows > 0 {
        out.batch = Some(struct_array(log_fields(), cols.finish()?));
    }
    Ok(out)
}

struct LogColumns {
    trace_id: Utf8Col,
    span_id: Utf8Col,
    time_unix_nano: PrimCol<UInt64Type>,
    observed_time_unix_nano: PrimCol<UInt64Type>,
    severity_number: PrimCol<Int32Type>,
    severity_text: Utf8Col,
    event_name: Utf8Col,
    body: Utf8Col,
    attributes: Utf8Col,
    flags: PrimCol<UInt32Type>,
    dropped_attributes_count: PrimCol<UInt32Type>,
    resource_attributes: Utf8Col,
    scope_name: Utf8Col,
    scope_version: Utf8Col,
    service_name: Utf8Col,
    truncated_attributes: StrListCol,
}

impl LogColumns {
    fn with_capacity(n: usize, wire_bytes: usize) -> Self {
        let text = |per_row: usize| Utf8Col::with_capacity(n, n * per_row);
        LogColumns {
            trace_id: text(32),
            span_id: text(16),
            time_unix_nano: PrimCol::with_capacity(n),
            observed_time_unix_nano: PrimCol::with_capacity(n),
            severity_number: PrimCol::with_capacity(n),
            severity_text: text(5),
            event_name: text(0),
            body: Utf8Col::with_capacity(n, wire_bytes / 2),
            attributes: Utf8Col::with_capacity(n, wire_bytes / 2),
            flags: PrimCol::with_capacity(n),
            dropped_attributes_count: PrimCol::with_capacity(n),
            resource_attributes: text(0),
            scope_name: text(16),
            scope_version: text(8),
            service_name: text(16),
            truncated_attributes: StrListCol::with_capacity(n),
        }
    }

    /// The record's own columns; the keys cut in its body, then its attributes, are left in
    /// `reader.truncated`.
    fn push(&mut self, mut record: LogRecord, reader: &mut Reader, attrs: &mut Attrs) {
        push_id(&mut self.trace_id, &record.trace_id);
        push_id(&mut self.span_id, &record.span_id);
        self.time_unix_nano.push(record.time_unix_nano);
        self.observed_time_unix_nano
            .push(record.observed_time_unix_nano);
        self.severity_number.push(record.severity_number);
        self.severity_text.push_or_null(&record.severity_text);
        self.event_name.push_or_null(&record.event_name);
        // An absent body and a body with no value set are both null.
        let body = reader.value(record.body.take(), "body");
        self.body.push_value(&body);
        attrs.clear();
        reader.read_into(attrs, take(&mut record.attributes));
        self.attributes.push_map(attrs);
        self.flags.push(record.flags);
        self.dropped_attributes_count
            .push(record.dropped_attributes_count);
    }

    fn finish(self) -> Result<Vec<ArrayRef>, TooLarge> {
        Ok(vec![
            Arc::new(self.trace_id.finish("trace_id")?),
            Arc::new(self.span_id.finish("span_id")?),
            Arc::new(self.time_unix_nano.finish()),
            Arc::new(self.observed_time_unix_nano.finish()),
            Arc::new(self.severity_number.finish()),
            Arc::new(self.severity_text.finish("severity_text")?),
            Arc::new(self.event_name.finish("event_name")?),
            Arc::new(self.body.finish("body")?),
            Arc::new(self.attributes.finish("attributes")?),
            Arc::new(self.flags.finish()),
            Arc::new(self.dropped_attributes_count.finish()),
            Arc::new(self.resource_attributes.finish("resource_attributes")?),
            Arc::new(self.scope_name.finish("scope_name")?),
            Arc::new(self.scope_version.finish("scope_version")?),
            Arc::new(self.service_name.finish("service_name")?),
            Arc::new(self.truncated_attributes.finish("truncated_attributes")?),
        ])
    }
}

/// A log's trace or span id as hex; null when empty or all zero (the record names no span).
fn push_id(col: &mut Utf8Col, id: &[u8]) {
    if id.iter().all(|&b| b == 0) {
        col.push_null();
    } else {
        col.push_hex(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans::tests::{column, kv, lists, s, strs, Echo};
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::common::v1::{
        AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
    };
    use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::resource::v1::Resource;

    fn request(resource: Vec<KeyValue>, records: Vec<LogRecord>) -> ExportLogsServiceRequest {
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: resource,
                    ..Resource::default()
                }),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "lib".into(),
                        attributes: vec![kv("never.read", s("long long"))],
                        ..Default::default()
                    }),
                    log_records: records,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }

    fn decode(request: ExportLogsServiceRequest, limit: usize) -> Decoded {
        decode_logs(request, limit, 0, &Echo).unwrap()
    }

    fn body(v: Any) -> Option<AnyValue> {
        Some(AnyValue { value: Some(v) })
    }

    #[test]
    fn schema_matches_the_store_batch_schema() {
        let names: Vec<String> = log_fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names.len(), 16);
        assert_eq!(names[7], "body");
        assert_eq!(names[15], "truncated_attributes");
    }

    #[test]
    fn ids_are_checked_by_length_only_and_not_counted_by_service() {
        let records = vec![
            LogRecord {
                trace_id: vec![1; 15],
                ..Default::default()
            },
            LogRecord {
                span_id: vec![1; 7],
                ..Default::default()
            },
            LogRecord {
                trace_id: vec![0; 16],
                span_id: vec![0; 8],
                ..Default::default()
            },
            LogRecord {
                trace_id: vec![0xab; 16],
                span_id: vec![0xcd; 8],
                ..Default::default()
            },
            LogRecord::default(),
        ];
        let out = decode(request(vec![kv("service.name", s("svc"))], records), 10);
        assert_eq!(out.rows, 3);
        assert_eq!(out.rejected.get("invalid_trace_id"), 1);
        assert_eq!(out.rejected.get("invalid_span_id"), 1);
        assert!(out.rejected_by_service.0.is_empty());
        let batch = out.batch.unwrap();
        assert_eq!(
            strs(&batch, "trace_id"),
            [None, Some("ab".repeat(16)), None]
        );
        assert_eq!(strs(&batch, "span_id"), [None, Some("cd".repeat(8)), None]);
    }

    #[test]
    fn record_fields_and_empty_strings_as_null() {
        let records = vec![
            LogRecord {
                time_unix_nano: u64::MAX,
                observed_time_unix_nano: 3,
                severity_number: -4,
                severity_text: "WARN".into(),
                event_name: "evt".into(),
                flags: 1,
                dropped_attributes_count: 2,
                attributes: vec![kv("a", Any::IntValue(1))],
                ..Default::default()
            },
            LogRecord::default(),
        ];
        let batch = decode(request(vec![kv("service.name", s("svc"))], records), 10)
            .batch
            .unwrap();
        let some = |v: &str| Some(v.to_owned());
        assert_eq!(
            column(&batch, "time_unix_nano")
                .as_primitive::<UInt64Type>()
                .value(0),
            u64::MAX
        );
        assert_eq!(
            column(&batch, "observed_time_unix_nano")
                .as_primitive::<UInt64Type>()
                .value(0),
            3
        );
        assert_eq!(
            column(&batch, "severity_number")
                .as_primitive::<Int32Type>()
                .value(0),
            -4
        );
        assert_eq!(
            column(&batch, "flags")
                .as_primitive::<UInt32Type>()
                .value(0),
            1
        );
        assert_eq!(
            column(&batch, "dropped_attributes_count")
                .as_primitive::<UInt32Type>()
                .value(0),
            2
        );
        assert_eq!(strs(&batch, "severity_text"), [some("WARN"), None]);
        assert_eq!(strs(&batch, "event_name"), [some("evt"), None]);
        assert_eq!(strs(&batch, "attributes"), [some(r#"{"a":1}"#), some("{}")]);
        assert_eq!(strs(&batch, "scope_name"), [some("lib"), some("lib")]);
        assert_eq!(strs(&batch, "scope_version"), [None, None]);
        assert_eq!(strs(&batch, "service_name"), [some("svc"), some("svc")]);
        assert_eq!(
            strs(&batch, "resource_attributes"),
            [
                some(r#"{"service.name":"svc"}"#),
                some(r#"{"service.name":"svc"}"#)
            ]
        );
    }

    #[test]
    fn body_is_json_and_null_when_absent_or_unset() {
        let kvlist = Any::KvlistValue(KeyValueList {
            values: vec![kv("k", Any::DoubleValue(0.5))],
        });
        let records = vec![
            LogRecord {
                body: body(s("hello")),
                ..Default::default()
            },
            LogRecord {
                body: body(kvlist),
                ..Default::default()
            },
            LogRecord {
                body: Some(AnyValue { value: None }),
                ..Default::default()
            },
            LogRecord::default(),
        ];
        let batch = decode(request(vec![], records), 10).batch.unwrap();
        let some = |v: &str| Some(v.to_owned());
        assert_eq!(
            strs(&batch, "body"),
            [
                some("\"hello\""),
                some(r#"{"k":0.5}"#),
                some("null"),
                some("null")
            ]
        );
    }

    #[test]
    fn truncated_keys_are_resource_then_body_then_attributes_scope_never_read() {
        let array = Any::ArrayValue(ArrayValue {
            values: vec![AnyValue {
                value: Some(s("long")),
            }],
        });
        let records = vec![
            LogRecord {
                attributes: vec![kv("attr", s("long"))],
                body: body(array),
                ..Default::default()
            },
            LogRecord {
                body: body(s("long")),
                ..Default::default()
            },
            LogRecord::default(),
        ];
        let out = decode(request(vec![kv("res", s("long"))], records), 2);
        let batch = out.batch.unwrap();
        let keys = |v: &[&str]| Some(v.iter().map(|k| k.to_string()).collect::<Vec<_>>());
        assert_eq!(
            lists(&batch, "truncated_attributes"),
            [
                keys(&["res", "body", "attr"]),
                keys(&["res", "body"]),
                keys(&["res"])
            ]
        );
        assert_eq!(out.truncated_rows, 3);
        assert_eq!(strs(&batch, "body")[0].as_deref(), Some(r#"["lo"]"#));
    }

    #[test]
    fn untruncated_logs_have_null_truncated_attributes() {
        let out = decode(request(vec![], vec![LogRecord::default()]), 10);
        assert_eq!(out.truncated_rows, 0);
        assert!(column(out.batch.as_ref().unwrap(), "truncated_attributes").is_null(0));
    }

    #[test]
    fn no_valid_record_means_no_batch() {
        let records = vec![LogRecord {
            trace_id: vec![1],
            ..Default::default()
        }];
        let out = decode(request(vec![], records), 10);
        assert!(out.batch.is_none());
        assert_eq!(out.rows, 0);
    }
}
