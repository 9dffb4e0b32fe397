//! ExportTraceServiceRequest to the columns of the store's `spans` batch: one pass, each span's
//! attributes read once, strings moved out of the decoded message rather than copied.

use std::mem::take;
use std::sync::Arc;

use arrow_array::types::{Int64Type, UInt32Type, UInt64Type};
use arrow_array::ArrayRef;
use arrow_schema::{DataType, Fields};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};
use opentelemetry_proto::tonic::trace::v1::Span;

use crate::attributes::Reader;
use crate::columns::{
    fields, str_list, struct_array, write_hex, write_uint, PrimCol, StrListCol, TooLarge, Utf8Col,
};
use crate::decoded::{resource_text, Decoded, Semantics};
use crate::json;
use crate::semconv::{Attrs, EventView, Normalized};

pub const SPAN_KINDS: [&str; 6] = [
    "UNSPECIFIED",
    "INTERNAL",
    "SERVER",
    "CLIENT",
    "PRODUCER",
    "CONSUMER",
];
pub const STATUS_CODES: [&str; 3] = ["UNSET", "OK", "ERROR"];

/// The `spans` batch schema, in the store's column order.
pub fn span_fields() -> Fields {
    use DataType::{Int64, UInt32, UInt64, Utf8};
    fields(&[
        ("trace_id", Utf8),
        ("span_id", Utf8),
        ("parent_span_id", Utf8),
        ("trace_state", Utf8),
        ("flags", UInt32),
        ("name", Utf8),
        ("kind", Utf8),
        ("start_time_unix_nano", UInt64),
        ("end_time_unix_nano", UInt64),
        ("status_code", Utf8),
        ("status_message", Utf8),
        ("resource_attributes", Utf8),
        ("resource_schema_url", Utf8),
        ("scope_name", Utf8),
        ("scope_version", Utf8),
        ("scope_attributes", Utf8),
        ("scope_schema_url", Utf8),
        ("attributes", Utf8),
        ("events", Utf8),
        ("links", Utf8),
        ("dropped_attributes_count", UInt32),
        ("dropped_events_count", UInt32),
        ("dropped_links_count", UInt32),
        ("truncated_attributes", str_list()),
        ("service_name", Utf8),
        ("service_version", Utf8),
        ("step_kind", Utf8),
        ("operation_name", Utf8),
        ("tool_name", Utf8),
        ("tool_call_id", Utf8),
        ("tool_arguments", Utf8),
        ("tool_result", Utf8),
        ("model", Utf8),
        ("input_tokens", Int64),
        ("output_tokens", Int64),
        ("agent_name", Utf8),
        ("conversation_id", Utf8),
        ("user_id", Utf8),
        ("error_type", Utf8),
        ("kept_as_text", str_list()),
    ])
}

/// The rejection reason for a span whose ids cannot identify it, or None.
pub fn invalid_span_ids(span: &Span) -> Option<&'static str> {
    let tid = &span.trace_id;
    if tid.len() != 16 || tid.iter().all(|&b| b == 0) {
        return Some("invalid_trace_id");
    }
    let sid = &span.span_id;
    if sid.len() != 8 || sid.iter().all(|&b| b == 0) {
        return Some("invalid_span_id");
    }
    if !matches!(span.parent_span_id.len(), 0 | 8) {
        return Some("invalid_parent_span_id");
    }
    None
}

/// An enum's name, or its decimal number when out of range (proto3 enums are open).
pub fn enum_name(names: &[&'static str], value: i32) -> std::borrow::Cow<'static, str> {
    match usize::try_from(value).ok().and_then(|i| names.get(i)) {
        Some(name) => (*name).into(),
        None => value.to_string().into(),
    }
}

/// Columns for every valid span of `request`; `wire_bytes` is the size of the request's body
/// (the attribute text is about as long, so its column is allocated once).
///
/// Python rejects a span whose conversion raises (`unprocessable_span`); here nothing per span
/// can fail (strings are UTF-8 by the time they are decoded, nesting is bounded by the parsers,
/// every value serializes), so that reason never occurs.
pub fn decode_spans<S: Semantics>(
    request: ExportTraceServiceRequest,
    max_attribute_length: usize,
    wire_bytes: usize,
    sem: &S,
) -> Result<Decoded, TooLarge> {
    let total: usize = request
        .resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum();
    let mut cols = SpanColumns::with_capacity(total, wire_bytes);
    let mut out = Decoded::default();
    let mut reader = Reader::new(max_attribute_length);
    let mut scratch = Scratch::default();
    for rs in request.resource_spans {
        reader.truncated.clear();
        let res_kvs = rs.resource.map(|r| r.attributes).unwrap_or_default();
        let res_attrs = reader.attributes(res_kvs);
        let res_json = json::map_text(&res_attrs);
        let service_name = resource_text(sem, &res_attrs, "service.name");
        let service_version = resource_text(sem, &res_attrs, "service.version");
        drop(res_attrs);
        let resource_truncated = take(&mut reader.truncated);
        for ss in rs.scope_spans {
            let scope = ss.scope.unwrap_or_default();
            reader.truncated.clone_from(&resource_truncated);
            let scope_json = if scope.attributes.is_empty() {
                None
            } else {
                let attrs = reader.attributes(scope.attributes);
                Some(json::map_text(&attrs))
            };
            // The resource's and scope's text is repeated on each of their spans.
            let spans = ss.spans.len();
            cols.resource_attributes.reserve(res_json.len() * spans);
            if let Some(json) = &scope_json {
                cols.scope_attributes.reserve(json.len() * spans);
            }
            // Keys cut in the resource or scope are flagged on every span that carries them.
            let shared = take(&mut reader.truncated);
            let origin = Origin {
                resource_attributes: &res_json,
                resource_schema_url: &rs.schema_url,
                scope_name: &scope.name,
                scope_version: &scope.version,
                scope_attributes: scope_json.as_deref(),
                scope_schema_url: &ss.schema_url,
                service_name: service_name.as_deref(),
                service_version: service_version.as_deref(),
            };
            for span in ss.spans {
                if let Some(reason) = invalid_span_ids(&span) {
                    out.rejected.add(reason);
                    out.rejected_by_service
                        .add(service_name.as_deref().unwrap_or(""));
                    continue;
                }
                // The span's own cut keys; the row's are `shared` followed by these.
                reader.truncated.clear();
                cols.push(span, &origin, &mut reader, &mut scratch, sem);
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
        out.batch = Some(struct_array(span_fields(), cols.finish()?));
    }
    Ok(out)
}

/// The columns every span of one scope shares.
struct Origin<'a> {
    resource_attributes: &'a str,
    resource_schema_url: &'a str,
    scope_name: &'a str,
    scope_version: &'a str,
    scope_attributes: Option<&'a str>,
    scope_schema_url: &'a str,
    service_name: Option<&'a str>,
    service_version: Option<&'a str>,
}

/// Maps reused from span to span, so their tables are allocated once per request.
#[derive(Default)]
struct Scratch {
    attrs: Attrs,
    events: Vec<Attrs>,
    event_names: Vec<String>,
    link: Attrs,
}

struct SpanColumns {
    trace_id: Utf8Col,
    span_id: Utf8Col,
    parent_span_id: Utf8Col,
    trace_state: Utf8Col,
    flags: PrimCol<UInt32Type>,
    name: Utf8Col,
    kind: Utf8Col,
    start_time_unix_nano: PrimCol<UInt64Type>,
    end_time_unix_nano: PrimCol<UInt64Type>,
    status_code: Utf8Col,
    status_message: Utf8Col,
    resource_attributes: Utf8Col,
    resource_schema_url: Utf8Col,
    scope_name: Utf8Col,
    scope_version: Utf8Col,
    scope_attributes: Utf8Col,
    scope_schema_url: Utf8Col,
    attributes: Utf8Col,
    events: Utf8Col,
    links: Utf8Col,
    dropped_attributes_count: PrimCol<UInt32Type>,
    dropped_events_count: PrimCol<UInt32Type>,
    dropped_links_count: PrimCol<UInt32Type>,
    truncated_attributes: StrListCol,
    service_name: Utf8Col,
    service_version: Utf8Col,
    step_kind: Utf8Col,
    operation_name: Utf8Col,
    tool_name: Utf8Col,
    tool_call_id: Utf8Col,
    tool_arguments: Utf8Col,
    tool_result: Utf8Col,
    model: Utf8Col,
    input_tokens: PrimCol<Int64Type>,
    output_tokens: PrimCol<Int64Type>,
    agent_name: Utf8Col,
    conversation_id: Utf8Col,
    user_id: Utf8Col,
    error_type: Utf8Col,
    kept_as_text: StrListCol,
}

impl SpanColumns {
    fn with_capacity(n: usize, wire_bytes: usize) -> Self {
        let text = |per_row: usize| Utf8Col::with_capacity(n, n * per_row);
        SpanColumns {
            trace_id: text(32),
            span_id: text(16),
            parent_span_id: text(16),
            trace_state: text(0),
            flags: PrimCol::with_capacity(n),
            name: text(24),
            kind: text(8),
            start_time_unix_nano: PrimCol::with_capacity(n),
            end_time_unix_nano: PrimCol::with_capacity(n),
            status_code: text(5),
            status_message: text(0),
            resource_attributes: text(0),
            resource_schema_url: text(0),
            scope_name: text(16),
            scope_version: text(8),
            scope_attributes: text(0),
            scope_schema_url: text(0),
            attributes: Utf8Col::with_capacity(n, wire_bytes),
            events: text(2),
            links: text(2),
            dropped_attributes_count: PrimCol::with_capacity(n),
            dropped_events_count: PrimCol::with_capacity(n),
            dropped_links_count: PrimCol::with_capacity(n),
            truncated_attributes: StrListCol::with_capacity(n),
            service_name: text(16),
            service_version: text(0),
            step_kind: text(5),
            operation_name: text(8),
            tool_name: text(8),
            tool_call_id: text(0),
            tool_arguments: text(0),
            tool_result: text(0),
            model: text(8),
            input_tokens: PrimCol::with_capacity(n),
            output_tokens: PrimCol::with_capacity(n),
            agent_name: text(0),
            conversation_id: text(0),
            user_id: text(0),
            error_type: text(0),
            kept_as_text: StrListCol::with_capacity(n),
        }
    }

    /// One valid span's columns, all but `truncated_attributes`; the keys cut in its
    /// attributes, then its events', then its links' are left in `reader.truncated`.
    fn push<S: Semantics>(
        &mut self,
        mut span: Span,
        origin: &Origin<'_>,
        reader: &mut Reader,
        scratch: &mut Scratch,
        sem: &S,
    ) {
        self.trace_id.push_hex(&span.trace_id);
        self.span_id.push_hex(&span.span_id);
        let parent = &span.parent_span_id;
        if parent.is_empty() || parent.iter().all(|&b| b == 0) {
            self.parent_span_id.push_null();
        } else {
            self.parent_span_id.push_hex(parent);
        }
        self.trace_state.push_or_null(&span.trace_state);
        self.flags.push(span.flags);
        self.name.push(&span.name);
        self.kind.push(&enum_name(&SPAN_KINDS, span.kind));
        self.start_time_unix_nano.push(span.start_time_unix_nano);
        self.end_time_unix_nano.push(span.end_time_unix_nano);
        let (code, message) = span
            .status
            .as_ref()
            .map_or((0, ""), |s| (s.code, &s.message));
        self.status_code.push(&enum_name(&STATUS_CODES, code));
        self.status_message.push_or_null(message);

        self.resource_attributes.push(origin.resource_attributes);
        self.resource_schema_url
            .push_or_null(origin.resource_schema_url);
        self.scope_name.push_or_null(origin.scope_name);
        self.scope_version.push_or_null(origin.scope_version);
        self.scope_attributes.push_opt(origin.scope_attributes);
        self.scope_schema_url.push_or_null(origin.scope_schema_url);

        let attrs = &mut scratch.attrs;
        attrs.clear();
        reader.read_into(attrs, take(&mut span.attributes));
        self.attributes.push_map(attrs);

        let n_events = span.events.len();
        scratch.event_names.clear();
        if scratch.events.len() < n_events {
            scratch.events.resize_with(n_events, Attrs::new);
        }
        write_events(
            self.events.buffer(),
            take(&mut span.events),
            reader,
            &mut scratch.events,
            &mut scratch.event_names,
        );
        self.events.commit();
        write_links(
            self.links.buffer(),
            take(&mut span.links),
            reader,
            &mut scratch.link,
        );
        self.links.commit();

        self.dropped_attributes_count
            .push(span.dropped_attributes_count);
        self.dropped_events_count.push(span.dropped_events_count);
        self.dropped_links_count.push(span.dropped_links_count);
        self.service_name.push_opt(origin.service_name);
        self.service_version.push_opt(origin.service_version);

        let views: Vec<EventView<'_>> = scratch
            .event_names
            .iter()
            .zip(&scratch.events)
            .map(|(name, attributes)| EventView { name, attributes })
            .collect();
        let normalized = sem.normalized(attrs, &span.name, &views, code);
        self.push_normalized(normalized);
    }

    fn push_normalized(&mut self, n: Normalized) {
        self.step_kind.push(n.step_kind);
        self.operation_name.push_opt(n.operation_name.as_deref());
        self.tool_name.push_opt(n.tool_name.as_deref());
        self.tool_call_id.push_opt(n.tool_call_id.as_deref());
        self.tool_arguments.push_opt(n.tool_arguments.as_deref());
        self.tool_result.push_opt(n.tool_result.as_deref());
        self.model.push_opt(n.model.as_deref());
        self.input_tokens.push_opt(n.input_tokens);
        self.output_tokens.push_opt(n.output_tokens);
        self.agent_name.push_opt(n.agent_name.as_deref());
        self.conversation_id.push_opt(n.conversation_id.as_deref());
        self.user_id.push_opt(n.user_id.as_deref());
        self.error_type.push_opt(n.error_type.as_deref());
        self.kept_as_text
            .push_or_null(n.kept_as_text.iter().flatten().map(String::as_str));
    }

    fn finish(self) -> Result<Vec<ArrayRef>, TooLarge> {
        Ok(vec![
            Arc::new(self.trace_id.finish("trace_id")?),
            Arc::new(self.span_id.finish("span_id")?),
            Arc::new(self.parent_span_id.finish("parent_span_id")?),
            Arc::new(self.trace_state.finish("trace_state")?),
            Arc::new(self.flags.finish()),
            Arc::new(self.name.finish("name")?),
            Arc::new(self.kind.finish("kind")?),
            Arc::new(self.start_time_unix_nano.finish()),
            Arc::new(self.end_time_unix_nano.finish()),
            Arc::new(self.status_code.finish("status_code")?),
            Arc::new(self.status_message.finish("status_message")?),
            Arc::new(self.resource_attributes.finish("resource_attributes")?),
            Arc::new(self.resource_schema_url.finish("resource_schema_url")?),
            Arc::new(self.scope_name.finish("scope_name")?),
            Arc::new(self.scope_version.finish("scope_version")?),
            Arc::new(self.scope_attributes.finish("scope_attributes")?),
            Arc::new(self.scope_schema_url.finish("scope_schema_url")?),
            Arc::new(self.attributes.finish("attributes")?),
            Arc::new(self.events.finish("events")?),
            Arc::new(self.links.finish("links")?),
            Arc::new(self.dropped_attributes_count.finish()),
            Arc::new(self.dropped_events_count.finish()),
            Arc::new(self.dropped_links_count.finish()),
            Arc::new(self.truncated_attributes.finish("truncated_attributes")?),
            Arc::new(self.service_name.finish("service_name")?),
            Arc::new(self.service_version.finish("service_version")?),
            Arc::new(self.step_kind.finish("step_kind")?),
            Arc::new(self.operation_name.finish("operation_name")?),
            Arc::new(self.tool_name.finish("tool_name")?),
            Arc::new(self.tool_call_id.finish("tool_call_id")?),
            Arc::new(self.tool_arguments.finish("tool_arguments")?),
            Arc::new(self.tool_result.finish("tool_result")?),
            Arc::new(self.model.finish("model")?),
            Arc::new(self.input_tokens.finish()),
            Arc::new(self.output_tokens.finish()),
            Arc::new(self.agent_name.finish("agent_name")?),
            Arc::new(self.conversation_id.finish("conversation_id")?),
            Arc::new(self.user_id.finish("user_id")?),
            Arc::new(self.error_type.finish("error_type")?),
            Arc::new(self.kept_as_text.finish("kept_as_text")?),
        ])
    }
}

/// The events column of one span, `[{"time_unix_nano":..,"name":..,"attributes":{..},
/// "dropped_attributes_count":..}, ..]`; each event's attributes land in `attrs[i]` and its name
/// in `names` for the normalizer.
fn write_events(
    out: &mut Vec<u8>,
    events: Vec<Event>,
    reader: &mut Reader,
    attrs: &mut [Attrs],
    names: &mut Vec<String>,
) {
    out.push(b'[');
    for (i, (event, attributes)) in events.into_iter().zip(attrs.iter_mut()).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        attributes.clear();
        reader.read_into(attributes, event.attributes);
        out.extend_from_slice(b"{\"time_unix_nano\":");
        write_uint(out, event.time_unix_nano);
        out.extend_from_slice(b",\"name\":");
        json::write_str(out, &event.name);
        out.extend_from_slice(b",\"attributes\":");
        json::write_map(out, attributes);
        out.extend_from_slice(b",\"dropped_attributes_count\":");
        write_uint(out, event.dropped_attributes_count.into());
        out.push(b'}');
        names.push(event.name);
    }
    out.push(b']');
}

/// The links column of one span, `[{"trace_id":hex,"span_id":hex,"trace_state":..,
/// "attributes":{..},"dropped_attributes_count":..,"flags":..}, ..]`.
fn write_links(out: &mut Vec<u8>, links: Vec<Link>, reader: &mut Reader, attrs: &mut Attrs) {
    out.push(b'[');
    for (i, link) in links.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        attrs.clear();
        reader.read_into(attrs, link.attributes);
        out.extend_from_slice(b"{\"trace_id\":\"");
        write_hex(out, &link.trace_id);
        out.extend_from_slice(b"\",\"span_id\":\"");
        write_hex(out, &link.span_id);
        out.extend_from_slice(b"\",\"trace_state\":");
        json::write_str(out, &link.trace_state);
        out.extend_from_slice(b",\"attributes\":");
        json::write_map(out, attrs);
        out.extend_from_slice(b",\"dropped_attributes_count\":");
        write_uint(out, link.dropped_attributes_count.into());
        out.extend_from_slice(b",\"flags\":");
        write_uint(out, link.flags.into());
        out.push(b'}');
    }
    out.push(b']');
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::{Array, StructArray};
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status};
    use serde_json::Value;

    /// Conventions that echo what they were given, so the tests see what the decoder passes.
    pub struct Echo;

    impl Semantics for Echo {
        fn text(&self, value: &Value) -> Option<String> {
            match value {
                Value::Null => None,
                Value::String(s) if s.is_empty() => None,
                Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            }
        }

        fn normalized(
            &self,
            attrs: &Attrs,
            name: &str,
            events: &[EventView<'_>],
            status_code: i32,
        ) -> Normalized {
            Normalized {
                step_kind: "other",
                operation_name: Some(name.to_owned()),
                tool_name: Some(
                    events
                        .iter()
                        .map(|e| {
                            format!(
                                "{}={}",
                                e.name,
                                Value::Object(e.attributes.clone().into_map())
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(";"),
                ),
                model: attrs.get("model").and_then(|v| self.text(v)),
                input_tokens: attrs.get("in").and_then(Value::as_i64),
                output_tokens: Some(i64::from(status_code)),
                kept_as_text: attrs.get("kept").map(|_| vec!["kept".to_owned()]),
                ..Normalized::default()
            }
        }
    }

    pub fn kv(key: &str, v: Any) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(v) }),
        }
    }

    pub fn s(text: &str) -> Any {
        Any::StringValue(text.into())
    }

    pub fn span(n: u8) -> Span {
        Span {
            trace_id: vec![1; 16],
            span_id: vec![n; 8],
            name: format!("span {n}"),
            ..Span::default()
        }
    }

    fn request(
        resource: Vec<KeyValue>,
        scope: InstrumentationScope,
        spans: Vec<Span>,
    ) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: resource,
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(scope),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }

    fn decode(request: ExportTraceServiceRequest, limit: usize) -> Decoded {
        decode_spans(request, limit, 0, &Echo).unwrap()
    }

    pub fn column<'a>(batch: &'a StructArray, name: &str) -> &'a ArrayRef {
        batch.column_by_name(name).unwrap()
    }

    pub fn strs(batch: &StructArray, name: &str) -> Vec<Option<String>> {
        column(batch, name)
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_owned))
            .collect()
    }

    pub fn lists(batch: &StructArray, name: &str) -> Vec<Option<Vec<String>>> {
        let list = column(batch, name).as_list::<i32>();
        (0..list.len())
            .map(|i| {
                list.is_valid(i).then(|| {
                    list.value(i)
                        .as_string::<i32>()
                        .iter()
                        .map(|v| v.unwrap().to_owned())
                        .collect()
                })
            })
            .collect()
    }

    fn one(v: &str) -> Vec<Option<String>> {
        vec![Some(v.to_owned())]
    }

    #[test]
    fn schema_matches_the_store_batch_schema() {
        let names: Vec<String> = span_fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names.len(), 40);
        assert_eq!(names[0], "trace_id");
        assert_eq!(names[23], "truncated_attributes");
        assert_eq!(names[39], "kept_as_text");
        assert!(span_fields().iter().all(|f| f.is_nullable()));
    }

    #[test]
    fn ids_become_lowercase_hex_and_empty_or_zero_parent_is_null() {
        let mut a = span(0xab);
        a.parent_span_id = vec![0xcd; 8];
        let mut b = span(2);
        b.parent_span_id = vec![0; 8];
        let c = span(3);
        let out = decode(request(vec![], Default::default(), vec![a, b, c]), 10);
        let batch = out.batch.unwrap();
        assert_eq!(
            strs(&batch, "trace_id")[0].as_deref(),
            Some("01010101010101010101010101010101")
        );
        assert_eq!(
            strs(&batch, "span_id")[0].as_deref(),
            Some("abababababababab")
        );
        assert_eq!(
            strs(&batch, "parent_span_id"),
            [Some("cdcdcdcdcdcdcdcd".to_owned()), None, None]
        );
    }

    #[test]
    fn invalid_ids_are_rejected_with_their_reason_and_service() {
        let mut bad_trace = span(1);
        bad_trace.trace_id = vec![0; 16];
        let mut short_trace = span(1);
        short_trace.trace_id = vec![1; 15];
        let mut bad_span = span(0);
        bad_span.span_id = vec![0; 8];
        let mut long_span = span(1);
        long_span.span_id = vec![1; 9];
        let mut bad_parent = span(1);
        bad_parent.parent_span_id = vec![1; 4];
        // The trace id is checked first.
        let mut both = span(0);
        both.trace_id = vec![];
        let spans = vec![
            bad_trace,
            short_trace,
            bad_span,
            long_span,
            bad_parent,
            both,
            span(5),
        ];
        let out = decode(
            request(
                vec![kv("service.name", s("svc"))],
                Default::default(),
                spans,
            ),
            10,
        );
        assert_eq!(out.rows, 1);
        assert_eq!(out.rejected.get("invalid_trace_id"), 3);
        assert_eq!(out.rejected.get("invalid_span_id"), 2);
        assert_eq!(out.rejected.get("invalid_parent_span_id"), 1);
        assert_eq!(out.rejected_by_service.0, [("svc".to_owned(), 6)]);
    }

    #[test]
    fn rejected_without_service_name_count_under_empty_string() {
        let mut bad = span(1);
        bad.trace_id = vec![];
        let out = decode(
            request(
                vec![kv("service.name", s(""))],
                Default::default(),
                vec![bad],
            ),
            10,
        );
        assert!(out.batch.is_none());
        assert_eq!(out.rows, 0);
        assert_eq!(out.rejected_by_service.0, [(String::new(), 1)]);
    }

    #[test]
    fn kind_and_status_are_names_or_decimal_numbers() {
        let mut a = span(1);
        a.kind = 3;
        a.status = Some(Status {
            code: 2,
            message: "boom".into(),
        });
        let mut b = span(2);
        b.kind = 9;
        b.status = Some(Status {
            code: -1,
            message: String::new(),
        });
        let c = span(3);
        let batch = decode(request(vec![], Default::default(), vec![a, b, c]), 10)
            .batch
            .unwrap();
        let some = |v: &str| Some(v.to_owned());
        assert_eq!(
            strs(&batch, "kind"),
            [some("CLIENT"), some("9"), some("UNSPECIFIED")]
        );
        assert_eq!(
            strs(&batch, "status_code"),
            [some("ERROR"), some("-1"), some("UNSET")]
        );
        assert_eq!(strs(&batch, "status_message"), [some("boom"), None, None]);
        // The status code reaches the normalizer as a number.
        let codes = column(&batch, "output_tokens").as_primitive::<Int64Type>();
        assert_eq!(codes.values().to_vec(), [2, -1, 0]);
    }

    #[test]
    fn empty_strings_are_null_where_python_says_or_none() {
        let out = decode(request(vec![], Default::default(), vec![span(1)]), 10);
        let batch = out.batch.unwrap();
        for name in [
            "trace_state",
            "status_message",
            "resource_schema_url",
            "scope_name",
            "scope_version",
            "scope_attributes",
            "scope_schema_url",
            "service_name",
            "service_version",
            "truncated_attributes",
        ] {
            assert!(column(&batch, name).is_null(0), "{name}");
        }
        assert_eq!(strs(&batch, "resource_attributes"), one("{}"));
        assert_eq!(strs(&batch, "attributes"), one("{}"));
        assert_eq!(strs(&batch, "events"), one("[]"));
        assert_eq!(strs(&batch, "links"), one("[]"));
        assert_eq!(out.truncated_rows, 0);
    }

    #[test]
    fn empty_span_name_stays_empty_string() {
        let mut a = span(1);
        a.name = String::new();
        let batch = decode(request(vec![], Default::default(), vec![a]), 10)
            .batch
            .unwrap();
        assert_eq!(strs(&batch, "name"), one(""));
    }

    #[test]
    fn origin_columns_are_shared_by_the_scope_spans() {
        let scope = InstrumentationScope {
            name: "lib".into(),
            version: "1.2".into(),
            attributes: vec![kv("sa", Any::IntValue(1))],
            dropped_attributes_count: 0,
        };
        let mut req = request(
            vec![
                kv("service.name", s("svc")),
                kv("service.version", Any::IntValue(3)),
            ],
            scope,
            vec![span(1), span(2)],
        );
        req.resource_spans[0].schema_url = "https://r".into();
        req.resource_spans[0].scope_spans[0].schema_url = "https://s".into();
        let batch = decode(req, 10).batch.unwrap();
        let two = |v: &str| vec![Some(v.to_owned()); 2];
        assert_eq!(
            strs(&batch, "resource_attributes"),
            two(r#"{"service.name":"svc","service.version":3}"#)
        );
        assert_eq!(strs(&batch, "resource_schema_url"), two("https://r"));
        assert_eq!(strs(&batch, "scope_name"), two("lib"));
        assert_eq!(strs(&batch, "scope_version"), two("1.2"));
        assert_eq!(strs(&batch, "scope_attributes"), two(r#"{"sa":1}"#));
        assert_eq!(strs(&batch, "scope_schema_url"), two("https://s"));
        assert_eq!(strs(&batch, "service_name"), two("svc"));
        assert_eq!(strs(&batch, "service_version"), two("3"));
    }

    #[test]
    fn missing_resource_scope_and_status_read_as_empty() {
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: None,
                scope_spans: vec![ScopeSpans {
                    scope: None,
                    spans: vec![span(1)],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        let batch = decode(req, 10).batch.unwrap();
        assert_eq!(strs(&batch, "resource_attributes"), one("{}"));
        assert!(column(&batch, "scope_name").is_null(0));
        assert_eq!(strs(&batch, "status_code"), one("UNSET"));
    }

    #[test]
    fn numbers_and_counts_are_copied() {
        let mut a = span(1);
        a.flags = 0x301;
        a.start_time_unix_nano = u64::MAX;
        a.end_time_unix_nano = 7;
        a.dropped_attributes_count = 1;
        a.dropped_events_count = 2;
        a.dropped_links_count = u32::MAX;
        let batch = decode(request(vec![], Default::default(), vec![a]), 10)
            .batch
            .unwrap();
        let u32s = |name| column(&batch, name).as_primitive::<UInt32Type>().value(0);
        let u64s = |name| column(&batch, name).as_primitive::<UInt64Type>().value(0);
        assert_eq!(u32s("flags"), 0x301);
        assert_eq!(u64s("start_time_unix_nano"), u64::MAX);
        assert_eq!(u64s("end_time_unix_nano"), 7);
        assert_eq!(u32s("dropped_attributes_count"), 1);
        assert_eq!(u32s("dropped_events_count"), 2);
        assert_eq!(u32s("dropped_links_count"), u32::MAX);
    }

    #[test]
    fn events_and_links_are_json_in_python_key_order() {
        let mut a = span(1);
        a.events = vec![
            Event {
                time_unix_nano: u64::MAX,
                name: "exception".into(),
                attributes: vec![kv("exception.type", s("E"))],
                dropped_attributes_count: 4,
            },
            Event {
                time_unix_nano: 0,
                name: "q\"".into(),
                attributes: vec![],
                dropped_attributes_count: 0,
            },
        ];
        a.links = vec![
            Link {
                trace_id: vec![0xff; 2],
                span_id: vec![],
                trace_state: "k=v".into(),
                attributes: vec![kv("l", Any::BoolValue(false))],
                dropped_attributes_count: 1,
                flags: 256,
            },
            Link::default(),
        ];
        let batch = decode(request(vec![], Default::default(), vec![a]), 10)
            .batch
            .unwrap();
        assert_eq!(
            strs(&batch, "events"),
            one(concat!(
                r#"[{"time_unix_nano":18446744073709551615,"name":"exception","#,
                r#""attributes":{"exception.type":"E"},"dropped_attributes_count":4},"#,
                r#"{"time_unix_nano":0,"name":"q\"","attributes":{},"dropped_attributes_count":0}]"#
            ))
        );
        assert_eq!(
            strs(&batch, "links"),
            one(concat!(
                r#"[{"trace_id":"ffff","span_id":"","trace_state":"k=v","attributes":{"l":false},"#,
                r#""dropped_attributes_count":1,"flags":256},"#,
                r#"{"trace_id":"","span_id":"","trace_state":"","attributes":{},"#,
                r#""dropped_attributes_count":0,"flags":0}]"#
            ))
        );
        // The normalizer sees each event's name and attributes.
        assert_eq!(
            strs(&batch, "tool_name"),
            one(r#"exception={"exception.type":"E"};q"={}"#)
        );
    }

    #[test]
    fn event_scratch_is_not_carried_to_the_next_span() {
        let mut a = span(1);
        a.events = vec![Event {
            name: "e".into(),
            attributes: vec![kv("x", Any::IntValue(1))],
            ..Event::default()
        }];
        let mut b = span(2);
        b.events = vec![Event {
            name: "f".into(),
            ..Event::default()
        }];
        let batch = decode(request(vec![], Default::default(), vec![a, b, span(3)]), 10)
            .batch
            .unwrap();
        assert_eq!(
            strs(&batch, "tool_name"),
            [
                Some(r#"e={"x":1}"#.to_owned()),
                Some("f={}".to_owned()),
                Some(String::new())
            ]
        );
    }

    #[test]
    fn truncated_keys_come_resource_scope_span_events_links_in_order() {
        let scope = InstrumentationScope {
            attributes: vec![kv("scope.k", s("long"))],
            ..Default::default()
        };
        let mut a = span(1);
        a.attributes = vec![
            kv("span.k", s("long")),
            kv("ok", s("ab")),
            kv("span.k", s("long")),
        ];
        a.events = vec![Event {
            attributes: vec![kv("event.k", s("long"))],
            ..Event::default()
        }];
        a.links = vec![Link {
            attributes: vec![kv("link.k", s("long"))],
            ..Link::default()
        }];
        let out = decode(
            request(vec![kv("res.k", s("long"))], scope, vec![a, span(2)]),
            2,
        );
        let batch = out.batch.unwrap();
        let keys = |v: &[&str]| Some(v.iter().map(|k| k.to_string()).collect::<Vec<_>>());
        assert_eq!(
            lists(&batch, "truncated_attributes"),
            [
                keys(&["res.k", "scope.k", "span.k", "span.k", "event.k", "link.k"]),
                keys(&["res.k", "scope.k"]),
            ]
        );
        assert_eq!(out.truncated_rows, 2);
        assert_eq!(
            strs(&batch, "attributes")[0].as_deref(),
            Some(r#"{"span.k":"lo","ok":"ab"}"#)
        );
        assert_eq!(
            strs(&batch, "resource_attributes")[0].as_deref(),
            Some(r#"{"res.k":"lo"}"#)
        );
    }

    #[test]
    fn truncation_in_one_span_does_not_flag_the_next() {
        let mut a = span(1);
        a.attributes = vec![kv("k", s("long"))];
        let out = decode(request(vec![], Default::default(), vec![a, span(2)]), 2);
        let batch = out.batch.unwrap();
        assert_eq!(
            lists(&batch, "truncated_attributes"),
            [Some(vec!["k".to_owned()]), None]
        );
        assert_eq!(out.truncated_rows, 1);
    }

    #[test]
    fn scope_truncation_stays_in_its_scope() {
        let mut req = request(vec![], Default::default(), vec![span(1)]);
        let first = ScopeSpans {
            scope: Some(InstrumentationScope {
                attributes: vec![kv("sk", s("long"))],
                ..Default::default()
            }),
            spans: vec![span(2)],
            schema_url: String::new(),
        };
        req.resource_spans[0].scope_spans.insert(0, first);
        let batch = decode(req, 2).batch.unwrap();
        assert_eq!(
            lists(&batch, "truncated_attributes"),
            [Some(vec!["sk".to_owned()]), None]
        );
    }

    #[test]
    fn resources_do_not_share_truncation_or_service() {
        let mut req = request(
            vec![kv("service.name", s("long"))],
            Default::default(),
            vec![span(1)],
        );
        let mut second = request(vec![], Default::default(), vec![span(2)]);
        req.resource_spans.append(&mut second.resource_spans);
        let batch = decode(req, 2).batch.unwrap();
        assert_eq!(
            lists(&batch, "truncated_attributes"),
            [Some(vec!["service.name".to_owned()]), None]
        );
        assert_eq!(strs(&batch, "service_name"), [Some("lo".to_owned()), None]);
    }

    #[test]
    fn normalized_columns_come_from_the_normalizer() {
        let mut a = span(1);
        a.attributes = vec![
            kv("model", s("gpt")),
            kv("in", Any::IntValue(12)),
            kv("kept", s("x")),
        ];
        let batch = decode(request(vec![], Default::default(), vec![a, span(2)]), 10)
            .batch
            .unwrap();
        assert_eq!(strs(&batch, "step_kind"), vec![Some("other".to_owned()); 2]);
        assert_eq!(strs(&batch, "operation_name")[0].as_deref(), Some("span 1"));
        assert_eq!(strs(&batch, "model"), [Some("gpt".to_owned()), None]);
        let tokens = column(&batch, "input_tokens").as_primitive::<Int64Type>();
        assert_eq!(tokens.iter().collect::<Vec<_>>(), [Some(12), None]);
        assert_eq!(
            lists(&batch, "kept_as_text"),
            [Some(vec!["kept".to_owned()]), None]
        );
        assert!(column(&batch, "agent_name").is_null(0));
    }

    #[test]
    fn request_without_spans_has_no_batch() {
        let out = decode(ExportTraceServiceRequest::default(), 10);
        assert!(out.batch.is_none());
        assert_eq!((out.rows, out.truncated_rows), (0, 0));
        assert!(out.rejected.0.is_empty());
    }
}
