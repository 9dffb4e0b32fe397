//! OTLP/JSON export requests to the same protobuf messages the binary encoding decodes to.
//!
//! Walks the OTLP shapes field by field, as `collector/normalize/otlp_json.py` does, with its
//! acceptance and its messages: unknown fields are ignored, a null member counts as absent,
//! 64-bit integers may be strings or numbers, enums integers or names, ids hex. A value of the
//! wrong type or range fails the request with a message naming the field; an id that is not hex
//! only makes its span (or record) invalid, so it is rejected alone later.

use std::borrow::Cow;
use std::fmt::Write;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::python::{self, PyInt};

/// Nested arrays / kvlists in one value; protobuf parsing stops near 100.
const MAX_DEPTH: usize = 64;
/// Nested arrays and objects in the document: orjson's limit.
const MAX_JSON_DEPTH: usize = 1024;
/// A non-hex id becomes an id of the wrong length: rejected alone.
const WRONG_LENGTH: &[u8] = b"\x00";

const UINT32: (i128, i128) = (0, u32::MAX as i128);
const UINT64: (i128, i128) = (0, u64::MAX as i128);
const INT32: (i128, i128) = (i32::MIN as i128, i32::MAX as i128);
const INT64: (i128, i128) = (i64::MIN as i128, i64::MAX as i128);

/// OTLP/JSON requires enums as integers; the protobuf JSON mapping also allows their names,
/// which some producers send, so both are read. The index is the value.
const SPAN_KINDS: [&str; 6] = [
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
];
const STATUS_CODES: [&str; 3] = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"];

/// An OTLP/JSON ExportTraceServiceRequest; `ignored` gets the top-level keys that are not the
/// request's (sorted). The error is the whole message the client is told.
pub fn traces_from_json(
    body: &[u8],
    ignored: &mut Vec<String>,
) -> Result<ExportTraceServiceRequest, String> {
    let scanned = prescan(body).map_err(not_json)?;
    with_stack_for(scanned.depth, || {
        let mut doc = parse(&scanned.body)?;
        note_ignored(&doc, "resourceSpans", ignored);
        traces(&mut doc).map_err(|e| e.told("ExportTraceServiceRequest"))
    })
}

/// An OTLP/JSON ExportLogsServiceRequest, as `traces_from_json`.
pub fn logs_from_json(
    body: &[u8],
    ignored: &mut Vec<String>,
) -> Result<ExportLogsServiceRequest, String> {
    let scanned = prescan(body).map_err(not_json)?;
    with_stack_for(scanned.depth, || {
        let mut doc = parse(&scanned.body)?;
        note_ignored(&doc, "resourceLogs", ignored);
        logs(&mut doc).map_err(|e| e.told("ExportLogsServiceRequest"))
    })
}

/// A sender in the wrong shape sends nothing, so it is told which keys were ignored; they are
/// noted before the request is read, so even a failed request tells them.
fn note_ignored(doc: &Map<String, Value>, top_key: &str, ignored: &mut Vec<String>) {
    let start = ignored.len();
    ignored.extend(doc.keys().filter(|k| *k != top_key).cloned());
    ignored[start..].sort_unstable();
}

// ---------------------------------------------------------------------------------------------
// The document

fn not_json(detail: impl std::fmt::Display) -> String {
    format!("request body is not valid JSON: {detail}")
}

/// Documents nested up to this deep are read on the caller's stack (serde_json's own default
/// limit); deeper ones, up to `MAX_JSON_DEPTH`, on a thread whose stack is sized for them: the
/// parser, the walk, `repr` and dropping the document all recurse once per level.
const SHALLOW_JSON_DEPTH: usize = 128;
/// About 4 KiB a level in an unoptimized build, a quarter of that optimized; 1024 levels fit
/// four times over. Only the pages touched are ever committed.
const DEEP_STACK_BYTES: usize = 16 << 20;

/// Runs `read` where a document of `depth` levels cannot overflow the stack.
fn with_stack_for<T: Send>(
    depth: usize,
    read: impl FnOnce() -> Result<T, String> + Send,
) -> Result<T, String> {
    if depth <= SHALLOW_JSON_DEPTH {
        return read();
    }
    std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name("otlp-json-deep".to_string())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(scope, read);
        match reader {
            Ok(reader) => reader
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => Err(not_json("nested too deep to read")),
        }
    })
}

/// The body as a JSON object, accepting what orjson accepts.
fn parse(body: &[u8]) -> Result<Map<String, Value>, String> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    // The prescan bounded the nesting (and `with_stack_for` gave it the stack), so serde_json's
    // own limit, far below orjson's, is not needed.
    deserializer.disable_recursion_limit();
    let value = Value::deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(not_json)?;
    match value {
        Value::Object(doc) => Ok(doc),
        _ => Err("request body must be a JSON object (an OTLP export request)".to_string()),
    }
}

/// The body as the parser is to read it, and how deeply it nests.
struct Scanned<'a> {
    body: Cow<'a, [u8]>,
    depth: usize,
}

/// One pass over the bytes outside strings, before parsing: measures the nesting and refuses a
/// document nested deeper than orjson allows, and turns each `-0` number into ` 0`: orjson reads
/// `-0` as the integer 0, serde_json as the float -0.0, which would differ as a double (its sign
/// bit) and in `repr`.
fn prescan(body: &[u8]) -> Result<Scanned<'_>, String> {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut negative_zeros = Vec::new();
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'"' => {
                // to the closing quote, stepping over escapes
                i += 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &body[i..]) {
                        Some(n) if body[i + n] == b'\\' => i = body.len().min(i + n + 2),
                        Some(n) => {
                            i += n;
                            break;
                        }
                        None => {
                            i = body.len();
                            break;
                        }
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(format!("depth limit exceeded: {}", position(body, i + 1)));
                }
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' if is_negative_zero(body, i) => negative_zeros.push(i),
            _ => {}
        }
        i += 1;
    }
    let body = if negative_zeros.is_empty() {
        Cow::Borrowed(body)
    } else {
        let mut patched = body.to_vec();
        for i in negative_zeros {
            patched[i] = b' ';
        }
        Cow::Owned(patched)
    };
    Ok(Scanned {
        body,
        depth: deepest,
    })
}

/// A `-` that starts the number `-0`: where a value may start, and followed by neither digits,
/// a fraction nor an exponent. A `-` anywhere else is an exponent's sign or invalid JSON anyway.
fn is_negative_zero(body: &[u8], i: usize) -> bool {
    let starts_value = i == 0
        || matches!(
            body[i - 1],
            b'[' | b',' | b':' | b' ' | b'\t' | b'\n' | b'\r'
        );
    starts_value
        && body.get(i + 1) == Some(&b'0')
        && !matches!(body.get(i + 2), Some(b'0'..=b'9' | b'.' | b'e' | b'E'))
}

/// Where offset `end` is, in orjson's words: `line 1 column 2 (char 1)`.
fn position(body: &[u8], end: usize) -> String {
    let before = &body[..end];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let chars = |bytes: &[u8]| bytes.iter().filter(|&&b| b & 0xc0 != 0x80).count();
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = chars(&before[line_start..]) + 1;
    format!("line {line} column {column} (char {})", chars(before))
}

// ---------------------------------------------------------------------------------------------
// Paths and errors

/// Where a value is, from the top of the document, built only when an error names it. Each
/// level renders as `name[index]tail` (index and tail optional), e.g. `spans[2].`.
struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    name: &'static str,
    index: Option<usize>,
    tail: &'static str,
}

impl<'a> Path<'a> {
    const ROOT: Path<'static> = Path {
        parent: None,
        name: "",
        index: None,
        tail: "",
    };

    /// `{self}{key}[{index}].`: an item of a repeated field.
    fn item(&'a self, key: &'static str, index: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            name: key,
            index: Some(index),
            tail: ".",
        }
    }

    /// `{self}{name}`.
    fn then(&'a self, name: &'static str) -> Path<'a> {
        Path {
            parent: Some(self),
            name,
            index: None,
            tail: "",
        }
    }

    /// `{self}{name}[{index}]`.
    fn indexed(&'a self, name: &'static str, index: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            name,
            index: Some(index),
            tail: "",
        }
    }

    fn render(&self, out: &mut String) {
        if let Some(parent) = self.parent {
            parent.render(out);
        }
        out.push_str(self.name);
        if let Some(index) = self.index {
            let _ = write!(out, "[{index}]");
        }
        out.push_str(self.tail);
    }

    /// The location `{self}{key}`.
    fn at(&self, key: &str) -> String {
        let mut out = String::new();
        self.render(&mut out);
        out.push_str(key);
        out
    }
}

/// A value of the wrong type or range, and where.
#[derive(Debug)]
struct Invalid {
    at: String,
    problem: String,
}

impl Invalid {
    fn new(path: &Path, key: &str, problem: impl Into<String>) -> Invalid {
        Invalid {
            at: path.at(key),
            problem: problem.into(),
        }
    }

    fn told(self, request: &str) -> String {
        format!(
            "not a valid OTLP/JSON {request}: {}: {}",
            self.at, self.problem
        )
    }
}

/// What a field reader gives: the value, or where and why it is wrong.
type Read<T> = Result<T, Invalid>;
type Obj = Map<String, Value>;

// ---------------------------------------------------------------------------------------------
// Field readers

/// A member, or None when it is absent or null.
fn get<'v>(parent: &'v Obj, key: &str) -> Option<&'v Value> {
    parent.get(key).filter(|v| !v.is_null())
}

fn get_mut<'v>(parent: &'v mut Obj, key: &str) -> Option<&'v mut Value> {
    parent.get_mut(key).filter(|v| !v.is_null())
}

/// The objects of a repeated field; absent or null means none. Every item is checked to be an
/// object before the first is read, as the Python lists them all first.
fn items<'v>(parent: &'v mut Obj, key: &'static str, path: &Path) -> Read<&'v mut [Value]> {
    match get_mut(parent, key) {
        None => Ok(&mut []),
        Some(Value::Array(list)) => {
            if let Some(i) = list.iter().position(|item| !item.is_object()) {
                return Err(Invalid::new(
                    &path.indexed(key, i),
                    "",
                    "expected an object",
                ));
            }
            Ok(list)
        }
        Some(_) => Err(Invalid::new(path, key, "expected a list")),
    }
}

/// An item `items` returned (always an object).
fn object(item: &mut Value) -> &mut Obj {
    match item {
        Value::Object(map) => map,
        _ => unreachable!("items() returns objects only"),
    }
}

/// An optional sub-object: None when absent or null, so the message field stays unset.
fn present<'v>(parent: &'v mut Obj, key: &str, path: &Path) -> Read<Option<&'v mut Obj>> {
    match get_mut(parent, key) {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(Invalid::new(path, key, "expected an object")),
    }
}

/// A string field, moved out of the document (each is read once).
fn text(parent: &mut Obj, key: &str, path: &Path) -> Read<String> {
    match get_mut(parent, key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(std::mem::take(s)),
        Some(_) => Err(Invalid::new(path, key, "expected a string")),
    }
}

/// An integer given as a number or a decimal string (the JSON form of 64-bit fields), within
/// `range`: a bool is refused, a whole float accepted, a string read as Python's `int()` does.
fn integer(value: &Value, path: &Path, key: &str, range: (i128, i128)) -> Read<i128> {
    let expected = || {
        Invalid::new(
            path,
            key,
            format!("expected an integer, got {}", python::repr(value)),
        )
    };
    let read = match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                PyInt::Small(i.into())
            } else if let Some(u) = n.as_u64() {
                PyInt::Small(u.into())
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if !f.is_finite() || f.fract() != 0.0 {
                    return Err(expected());
                }
                if f.abs() < 1e38 {
                    PyInt::Small(f as i128) // exact: whole and within i128
                } else {
                    PyInt::Big(python::whole_float_decimal(f))
                }
            }
        }
        Value::String(s) => python::parse_int(s).ok_or_else(expected)?,
        _ => return Err(expected()),
    };
    match read {
        PyInt::Small(v) if range.0 <= v && v <= range.1 => Ok(v),
        PyInt::Small(v) => Err(Invalid::new(path, key, format!("{v} is out of range"))),
        PyInt::Big(digits) => Err(Invalid::new(path, key, format!("{digits} is out of range"))),
    }
}

/// An integer field; absent or null is 0.
fn number(parent: &Obj, key: &str, path: &Path, range: (i128, i128)) -> Read<i128> {
    get(parent, key).map_or(Ok(0), |value| integer(value, path, key, range))
}

fn uint32(parent: &Obj, key: &str, path: &Path) -> Read<u32> {
    Ok(number(parent, key, path, UINT32)? as u32)
}

fn uint64(parent: &Obj, key: &str, path: &Path) -> Read<u64> {
    Ok(number(parent, key, path, UINT64)? as u64)
}

/// An enum as its integer or its name (`names[i]` is value i).
fn enumeration(parent: &Obj, key: &str, path: &Path, names: &[&str]) -> Read<i32> {
    if let Some(Value::String(s)) = get(parent, key) {
        if let Some(i) = names.iter().position(|name| name == s) {
            return Ok(i as i32);
        }
    }
    Ok(number(parent, key, path, INT32)? as i32)
}

/// An id in hex; absent, null or "" is empty, and hex that `bytes.fromhex` refuses is `invalid`
/// (a value of the wrong length for the ids that must be rejected, empty for the others).
fn hex_id(parent: &Obj, key: &str, path: &Path, invalid: &[u8]) -> Read<Vec<u8>> {
    match get(parent, key) {
        None => Ok(Vec::new()),
        Some(Value::String(s)) if s.is_empty() => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(python::from_hex(s).unwrap_or_else(|| invalid.to_vec())),
        Some(_) => Err(Invalid::new(path, key, "expected a hex string")),
    }
}

/// Standard or URL-safe base64, padded or not (what protobuf's JSON mapping accepts).
fn b64(value: &Value, path: &Path, key: &str) -> Read<Vec<u8>> {
    let Value::String(s) = value else {
        return Err(Invalid::new(path, key, "expected a base64 string"));
    };
    let mut text: Vec<u8> = s
        .bytes()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            _ => b,
        })
        .collect();
    // padded to a multiple of 4 characters (Python counts characters; only ASCII can decode)
    let chars = s.chars().count();
    text.extend(std::iter::repeat_n(b'=', (4 - chars % 4) % 4));
    python::b64decode_strict(&text).ok_or_else(|| Invalid::new(path, key, "expected base64"))
}

/// A double: a number, "NaN" / "Infinity" / "-Infinity", or a string Python's `float()` reads.
fn double(value: &Value, path: &Path, key: &str) -> Read<f64> {
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => python::parse_float(s),
        },
        _ => None,
    };
    parsed.ok_or_else(|| {
        Invalid::new(
            path,
            key,
            format!("expected a number, got {}", python::repr(value)),
        )
    })
}

/// Python truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

// ---------------------------------------------------------------------------------------------
// Values and attributes

/// An AnyValue from its JSON form (a null member counts as absent, as in protobuf); the first
/// member present of stringValue, intValue, doubleValue, boolValue, arrayValue, kvlistValue,
/// bytesValue decides, and an object with none of them is an AnyValue with no value.
fn any_value(doc: &mut Value, path: &Path, depth: usize) -> Read<AnyValue> {
    let Value::Object(doc) = doc else {
        return Err(Invalid::new(path, "", "expected an AnyValue object"));
    };
    if depth > MAX_DEPTH {
        return Err(Invalid::new(
            path,
            "",
            format!("values nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    let value = if let Some(v) = get_mut(doc, "stringValue") {
        match v {
            Value::String(s) => any_value::Value::StringValue(std::mem::take(s)),
            _ => return Err(Invalid::new(path, ".stringValue", "expected a string")),
        }
    } else if let Some(v) = get(doc, "intValue") {
        any_value::Value::IntValue(integer(v, path, ".intValue", INT64)? as i64)
    } else if let Some(v) = get(doc, "doubleValue") {
        any_value::Value::DoubleValue(double(v, path, ".doubleValue")?)
    } else if let Some(v) = get(doc, "boolValue") {
        match v {
            Value::Bool(b) => any_value::Value::BoolValue(*b),
            _ => return Err(Invalid::new(path, ".boolValue", "expected true or false")),
        }
    } else if let Some(v) = get_mut(doc, "arrayValue") {
        let Value::Object(array) = v else {
            return Err(Invalid::new(path, ".arrayValue", "expected an object"));
        };
        // `array.get("values") or []`: any falsy value is an empty list
        let values = match array.get_mut("values") {
            Some(Value::Array(list)) => list.as_mut_slice(),
            Some(other) if truthy(other) => {
                return Err(Invalid::new(path, ".arrayValue.values", "expected a list"));
            }
            _ => &mut [],
        };
        let mut out = Vec::with_capacity(values.len());
        for (i, item) in values.iter_mut().enumerate() {
            out.push(any_value(item, &path.indexed(".arrayValue", i), depth + 1)?);
        }
        any_value::Value::ArrayValue(ArrayValue { values: out })
    } else if let Some(v) = get_mut(doc, "kvlistValue") {
        let Value::Object(kvlist) = v else {
            return Err(Invalid::new(path, ".kvlistValue", "expected an object"));
        };
        let values = attributes(kvlist, &path.then(".kvlistValue."), "values", depth + 1)?;
        any_value::Value::KvlistValue(KeyValueList { values })
    } else if let Some(v) = get(doc, "bytesValue") {
        any_value::Value::BytesValue(b64(v, path, ".bytesValue")?)
    } else {
        return Ok(AnyValue { value: None });
    };
    Ok(AnyValue { value: Some(value) })
}

/// The key-values of `parent[key]`; a value that is absent or null stays unset.
fn attributes(
    parent: &mut Obj,
    path: &Path,
    key: &'static str,
    depth: usize,
) -> Read<Vec<KeyValue>> {
    let list = items(parent, key, path)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, kv_doc) in list.iter_mut().enumerate() {
        let kv_doc = object(kv_doc);
        let here = path.item(key, i);
        let key = text(kv_doc, "key", &here)?;
        let value = match get_mut(kv_doc, "value") {
            Some(value) => Some(any_value(value, &here.then("value"), depth)?),
            None => None,
        };
        out.push(KeyValue { key, value });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Messages

/// `resource` of a resource level: unset when absent or null, set (maybe empty) otherwise.
fn resource(level: &mut Obj, level_path: &Path) -> Read<Option<Resource>> {
    let Some(doc) = present(level, "resource", level_path)? else {
        return Ok(None);
    };
    let path = level_path.then("resource.");
    let attributes = attributes(doc, &path, "attributes", 0)?;
    let dropped_attributes_count = uint32(doc, "droppedAttributesCount", &path)?;
    Ok(Some(Resource {
        attributes,
        dropped_attributes_count,
        ..Default::default()
    }))
}

/// `scope` of a scope level, as `resource`.
fn scope(level: &mut Obj, level_path: &Path) -> Read<Option<InstrumentationScope>> {
    let Some(doc) = present(level, "scope", level_path)? else {
        return Ok(None);
    };
    let path = level_path.then("scope.");
    let name = text(doc, "name", &path)?;
    let version = text(doc, "version", &path)?;
    let attributes = attributes(doc, &path, "attributes", 0)?;
    let dropped_attributes_count = uint32(doc, "droppedAttributesCount", &path)?;
    Ok(Some(InstrumentationScope {
        name,
        version,
        attributes,
        dropped_attributes_count,
    }))
}

fn fill_span(doc: &mut Obj, path: &Path) -> Read<Span> {
    let mut span = Span {
        trace_id: hex_id(doc, "traceId", path, b"")?,
        span_id: hex_id(doc, "spanId", path, b"")?,
        parent_span_id: hex_id(doc, "parentSpanId", path, WRONG_LENGTH)?,
        trace_state: text(doc, "traceState", path)?,
        flags: uint32(doc, "flags", path)?,
        name: text(doc, "name", path)?,
        kind: enumeration(doc, "kind", path, &SPAN_KINDS)?,
        start_time_unix_nano: uint64(doc, "startTimeUnixNano", path)?,
        end_time_unix_nano: uint64(doc, "endTimeUnixNano", path)?,
        attributes: attributes(doc, path, "attributes", 0)?,
        dropped_attributes_count: uint32(doc, "droppedAttributesCount", path)?,
        ..Default::default()
    };
    for (i, event_doc) in items(doc, "events", path)?.iter_mut().enumerate() {
        let event_doc = object(event_doc);
        let here = path.item("events", i);
        span.events.push(span::Event {
            time_unix_nano: uint64(event_doc, "timeUnixNano", &here)?,
            name: text(event_doc, "name", &here)?,
            attributes: attributes(event_doc, &here, "attributes", 0)?,
            dropped_attributes_count: uint32(event_doc, "droppedAttributesCount", &here)?,
        });
    }
    span.dropped_events_count = uint32(doc, "droppedEventsCount", path)?;
    for (i, link_doc) in items(doc, "links", path)?.iter_mut().enumerate() {
        let link_doc = object(link_doc);
        let here = path.item("links", i);
        span.links.push(span::Link {
            trace_id: hex_id(link_doc, "traceId", &here, WRONG_LENGTH)?,
            span_id: hex_id(link_doc, "spanId", &here, WRONG_LENGTH)?,
            trace_state: text(link_doc, "traceState", &here)?,
            attributes: attributes(link_doc, &here, "attributes", 0)?,
            dropped_attributes_count: uint32(link_doc, "droppedAttributesCount", &here)?,
            flags: uint32(link_doc, "flags", &here)?,
        });
    }
    span.dropped_links_count = uint32(doc, "droppedLinksCount", path)?;
    // an absent status stays absent
    if let Some(status) = present(doc, "status", path)? {
        let here = path.then("status.");
        span.status = Some(Status {
            message: text(status, "message", &here)?,
            code: enumeration(status, "code", &here, &STATUS_CODES)?,
        });
    }
    Ok(span)
}

fn fill_log(doc: &mut Obj, path: &Path) -> Read<LogRecord> {
    let time_unix_nano = uint64(doc, "timeUnixNano", path)?;
    let observed_time_unix_nano = uint64(doc, "observedTimeUnixNano", path)?;
    let severity_number = number(doc, "severityNumber", path, INT32)? as i32;
    let severity_text = text(doc, "severityText", path)?;
    let body = match get_mut(doc, "body") {
        Some(body) => Some(any_value(body, &path.then("body"), 0)?),
        None => None,
    };
    Ok(LogRecord {
        time_unix_nano,
        observed_time_unix_nano,
        severity_number,
        severity_text,
        body,
        attributes: attributes(doc, path, "attributes", 0)?,
        dropped_attributes_count: uint32(doc, "droppedAttributesCount", path)?,
        flags: uint32(doc, "flags", path)?,
        trace_id: hex_id(doc, "traceId", path, WRONG_LENGTH)?,
        span_id: hex_id(doc, "spanId", path, WRONG_LENGTH)?,
        event_name: text(doc, "eventName", path)?,
    })
}

/// resource → scope → spans.
fn traces(doc: &mut Obj) -> Read<ExportTraceServiceRequest> {
    let root = Path::ROOT;
    let mut request = ExportTraceServiceRequest::default();
    for (i, r_doc) in items(doc, "resourceSpans", &root)?.iter_mut().enumerate() {
        let r_doc = object(r_doc);
        let rpath = root.item("resourceSpans", i);
        let mut level = ResourceSpans {
            resource: resource(r_doc, &rpath)?,
            schema_url: text(r_doc, "schemaUrl", &rpath)?,
            ..Default::default()
        };
        for (j, s_doc) in items(r_doc, "scopeSpans", &rpath)?.iter_mut().enumerate() {
            let s_doc = object(s_doc);
            let spath = rpath.item("scopeSpans", j);
            let mut scope_level = ScopeSpans {
                scope: scope(s_doc, &spath)?,
                schema_url: text(s_doc, "schemaUrl", &spath)?,
                ..Default::default()
            };
            for (k, span_doc) in items(s_doc, "spans", &spath)?.iter_mut().enumerate() {
                let span = fill_span(object(span_doc), &spath.item("spans", k))?;
                scope_level.spans.push(span);
            }
            level.scope_spans.push(scope_level);
        }
        request.resource_spans.push(level);
    }
    Ok(request)
}

/// resource → scope → log records.
fn logs(doc: &mut Obj) -> Read<ExportLogsServiceRequest> {
    let root = Path::ROOT;
    let mut request = ExportLogsServiceRequest::default();
    for (i, r_doc) in items(doc, "resourceLogs", &root)?.iter_mut().enumerate() {
        let r_doc = object(r_doc);
        let rpath = root.item("resourceLogs", i);
        let mut level = ResourceLogs {
            resource: resource(r_doc, &rpath)?,
            schema_url: text(r_doc, "schemaUrl", &rpath)?,
            ..Default::default()
        };
        for (j, s_doc) in items(r_doc, "scopeLogs", &rpath)?.iter_mut().enumerate() {
            let s_doc = object(s_doc);
            let spath = rpath.item("scopeLogs", j);
            let mut scope_level = ScopeLogs {
                scope: scope(s_doc, &spath)?,
                schema_url: text(s_doc, "schemaUrl", &spath)?,
                ..Default::default()
            };
            for (k, record_doc) in items(s_doc, "logRecords", &spath)?.iter_mut().enumerate() {
                let record = fill_log(object(record_doc), &spath.item("logRecords", k))?;
                scope_level.log_records.push(record);
            }
            level.scope_logs.push(scope_level);
        }
        request.resource_logs.push(level);
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";

    fn traces(doc: &Value) -> std::result::Result<ExportTraceServiceRequest, String> {
        traces_from_json(doc.to_string().as_bytes(), &mut Vec::new())
    }

    fn trace_error(doc: Value) -> String {
        traces(&doc).expect_err("should be refused")
    }

    fn logs(doc: &Value) -> std::result::Result<ExportLogsServiceRequest, String> {
        logs_from_json(doc.to_string().as_bytes(), &mut Vec::new())
    }

    fn span_doc(span: Value) -> Value {
        json!({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    }

    fn one_span(span: Value) -> Span {
        let mut request = traces(&span_doc(span)).expect("should be accepted");
        request
            .resource_spans
            .remove(0)
            .scope_spans
            .remove(0)
            .spans
            .remove(0)
    }

    fn span_error(span: Value) -> String {
        trace_error(span_doc(span))
    }

    fn attr_doc(value: Value) -> Value {
        json!({"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": value}]}}]})
    }

    fn one_value(value: Value) -> Option<any_value::Value> {
        let mut request = traces(&attr_doc(value)).expect("should be accepted");
        let resource = request.resource_spans.remove(0).resource.expect("resource");
        resource.attributes[0].value.clone().expect("value").value
    }

    fn value_error(value: Value) -> String {
        trace_error(attr_doc(value))
    }

    const ATTR: &str = "not a valid OTLP/JSON ExportTraceServiceRequest: \
                        resourceSpans[0].resource.attributes[0].value";
    const SPAN: &str = "not a valid OTLP/JSON ExportTraceServiceRequest: \
                        resourceSpans[0].scopeSpans[0].spans[0].";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn a_full_request_encodes_to_the_same_bytes_as_python() {
        // expected bytes: Python's traces_from_json(body).SerializeToString()
        let body = json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}],
                         "droppedAttributesCount": 1},
            "schemaUrl": "r",
            "scopeSpans": [{"scope": {"name": "n", "version": "v"}, "schemaUrl": "s", "spans": [{
                "traceId": TRACE_ID, "spanId": "b7ad6b7169203331", "parentSpanId": "zz",
                "traceState": "t=1", "flags": 257, "name": "chat", "kind": "SPAN_KIND_CLIENT",
                "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000000000000001u64,
                "attributes": [
                    {"key": "a", "value": {"arrayValue": {"values": [
                        {"intValue": "3"}, {"doubleValue": "NaN"}, {"boolValue": false},
                        {"bytesValue": "QUJD"}, {}]}}},
                    {"key": "b", "value": {"kvlistValue": {}}},
                    {"key": "c"}],
                "droppedAttributesCount": 2,
                "events": [{"timeUnixNano": "5", "name": "e", "droppedAttributesCount": 3}],
                "droppedEventsCount": 4,
                "links": [{"traceId": TRACE_ID, "spanId": "q", "traceState": "x", "flags": 1,
                           "droppedAttributesCount": 6}],
                "droppedLinksCount": 5,
                "status": {}}]}]}]});
        let request = traces(&body).unwrap();
        assert_eq!(
            hex(&request.encode_to_vec()),
            "0adf010a190a150a0c736572766963652e6e616d6512050a03737663100112be010a060a016e1201761\
             2b0010a100af7651916cd43dd8448eb211c80319c1208b7ad6b71692033311a03743d312201002a0463\
             68617430033900002a36fe9c97174101002a36fe9c97174a230a0161121e2a1c0a0218030a09210000\
             00000000f87f0a0210000a053a034142430a004a070a0162120232004a030a016350025a0e09050000\
             0000000000120165200360046a1f0a100af7651916cd43dd8448eb211c80319c1201001a0178280635\
             0100000070057a008501010100001a01731a0172"
        );
    }

    #[test]
    fn a_full_logs_request_encodes_to_the_same_bytes_as_python() {
        let body = json!({"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {}, "logRecords": [
            {"timeUnixNano": "1", "observedTimeUnixNano": 2, "severityNumber": -9,
             "severityText": "INFO",
             "body": {"kvlistValue": {"values": [{"key": "a", "value": {"arrayValue": {}}}]}},
             "attributes": [{"key": "k", "value": {"intValue": -4}}],
             "droppedAttributesCount": 1, "flags": 1, "traceId": TRACE_ID, "spanId": "xyz",
             "eventName": "ev"},
            {"body": {}}]}]}]});
        let request = logs(&body).unwrap();
        assert_eq!(
            hex(&request.encode_to_vec()),
            "0a6e0a00126a0a00126209010000000000000010f7ffffffffffffffff011a04494e464f2a0b32090a07\
             0a016112022a0032100a016b120b18fcffffffffffffffff01380145010000004a100af7651916cd43dd\
             8448eb211c80319c5201005902000000000000006202657612022a00"
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_told_so() {
        let error = traces_from_json(b"{\"resourceSpans\": [", &mut Vec::new()).unwrap_err();
        assert!(
            error.starts_with("request body is not valid JSON: "),
            "{error}"
        );
        for body in [
            &b""[..],
            b"{} x",
            b"\xef\xbb\xbf{}",
            b"{\"a\": \"\\ud800\"}",
            b"{\"a\": \"\xff\"}",
            b"[1e400]",
        ] {
            let error = traces_from_json(body, &mut Vec::new()).unwrap_err();
            assert!(
                error.starts_with("request body is not valid JSON: "),
                "{error}"
            );
        }
    }

    #[test]
    fn a_body_that_is_not_an_object_is_told_so() {
        for body in [&b"[]"[..], b"null", b"5", b"\"x\""] {
            assert_eq!(
                logs_from_json(body, &mut Vec::new()).unwrap_err(),
                "request body must be a JSON object (an OTLP export request)"
            );
        }
    }

    #[test]
    fn ignored_keys_are_the_other_top_level_keys_sorted_even_when_the_request_fails() {
        let mut ignored = vec!["before".to_string()];
        let body = br#"{"resourceSpans": 5, "b": 1, "a": null, "Z": 3, "\u00e9": 2}"#;
        let error = traces_from_json(body, &mut ignored).unwrap_err();
        assert!(error.ends_with("resourceSpans: expected a list"), "{error}");
        assert_eq!(ignored, ["before", "Z", "a", "b", "é"]);
        let mut ignored = Vec::new();
        logs_from_json(br#"{"resourceSpans": []}"#, &mut ignored).unwrap();
        assert_eq!(ignored, ["resourceSpans"]);
    }

    #[test]
    fn null_members_count_as_absent() {
        let span = one_span(
            json!({"name": null, "kind": null, "status": null, "attributes": null,
                                   "traceId": null, "startTimeUnixNano": null}),
        );
        assert_eq!(span, Span::default());
        let request = traces(&json!({"resourceSpans": [{"resource": null, "scopeSpans": null}]}));
        assert_eq!(request.unwrap().resource_spans[0], ResourceSpans::default());
        assert_eq!(
            one_value(json!({"stringValue": null, "intValue": null, "boolValue": true})),
            Some(any_value::Value::BoolValue(true))
        );
    }

    #[test]
    fn present_sub_messages_are_set_even_when_empty() {
        let mut request = traces(&json!({"resourceSpans": [{"resource": {},
            "scopeSpans": [{"scope": {}, "spans": [{"status": {}}]}]}]}))
        .unwrap();
        let level = request.resource_spans.remove(0);
        assert_eq!(level.resource, Some(Resource::default()));
        assert_eq!(
            level.scope_spans[0].scope,
            Some(InstrumentationScope::default())
        );
        assert_eq!(
            level.scope_spans[0].spans[0].status,
            Some(Status::default())
        );
        assert_eq!(
            one_value(json!({"arrayValue": {}})),
            Some(any_value::Value::ArrayValue(ArrayValue::default()))
        );
        assert_eq!(
            one_value(json!({"kvlistValue": {}})),
            Some(any_value::Value::KvlistValue(KeyValueList::default()))
        );
        let record =
            logs(&json!({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {}}]}]}]}))
                .unwrap()
                .resource_logs[0]
                .scope_logs[0]
                .log_records[0]
                .clone();
        assert_eq!(record.body, Some(AnyValue { value: None }));
    }

    #[test]
    fn a_wrong_type_names_its_full_path() {
        let doc = json!({"resourceSpans": [{"scopeSpans": [{}, {"spans": [{}, {}, {"startTimeUnixNano": true}]}]}]});
        assert_eq!(
            trace_error(doc),
            "not a valid OTLP/JSON ExportTraceServiceRequest: \
             resourceSpans[0].scopeSpans[1].spans[2].startTimeUnixNano: expected an integer, got True"
        );
        assert_eq!(
            span_error(json!({"name": 5})),
            format!("{SPAN}name: expected a string")
        );
        assert_eq!(
            span_error(
                json!({"events": [{}, {"attributes": [{"key": "k", "value": {"kvlistValue": {"values": [{"key": 1}]}}}]}]})
            ),
            format!(
                "{SPAN}events[1].attributes[0].value.kvlistValue.values[0].key: expected a string"
            )
        );
        assert_eq!(
            span_error(json!({"status": {"code": "x"}})),
            format!("{SPAN}status.code: expected an integer, got 'x'")
        );
        assert_eq!(
            span_error(json!({"status": []})),
            format!("{SPAN}status: expected an object")
        );
        assert_eq!(
            trace_error(json!({"resourceSpans": [{"resource": 1}]})),
            "not a valid OTLP/JSON ExportTraceServiceRequest: resourceSpans[0].resource: expected an object"
        );
        let error =
            logs(&json!({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": 5}]}]}]}));
        assert_eq!(
            error.unwrap_err(),
            "not a valid OTLP/JSON ExportLogsServiceRequest: \
             resourceLogs[0].scopeLogs[0].logRecords[0].body: expected an AnyValue object"
        );
    }

    #[test]
    fn every_item_of_a_list_is_checked_before_the_first_is_read() {
        assert_eq!(
            span_error(json!({"events": [{"name": 5}, 3]})),
            format!("{SPAN}events[1]: expected an object")
        );
        assert_eq!(
            span_error(json!({"links": {}})),
            format!("{SPAN}links: expected a list")
        );
    }

    #[test]
    fn fields_are_read_in_the_order_python_reads_them() {
        // the first wrong field in Python's order is the one told
        assert_eq!(
            span_error(json!({"name": 1, "flags": "x", "traceId": 5})),
            format!("{SPAN}traceId: expected a hex string")
        );
        assert_eq!(
            span_error(json!({"status": 1, "droppedLinksCount": -1, "links": [{"flags": -1}]})),
            format!("{SPAN}links[0].flags: -1 is out of range")
        );
    }

    #[test]
    fn integers_are_numbers_whole_floats_or_python_int_strings() {
        let span = one_span(json!({"startTimeUnixNano": " +1_700_000_000_000_000_000 ",
                                   "endTimeUnixNano": 1.7e18, "flags": "\u{661}", "kind": "  3"}));
        assert_eq!(span.start_time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(span.end_time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!((span.flags, span.kind), (1, 3));
        assert_eq!(
            one_value(json!({"intValue": "-9223372036854775808"})),
            Some(any_value::Value::IntValue(i64::MIN))
        );
        for (value, problem) in [
            (json!(true), "expected an integer, got True"),
            (json!(1.5), "expected an integer, got 1.5"),
            (json!("1.0"), "expected an integer, got '1.0'"),
            (json!("1__0"), "expected an integer, got '1__0'"),
            (
                json!([1, "a", null]),
                "expected an integer, got [1, 'a', None]",
            ),
            (json!({"k": false}), "expected an integer, got {'k': False}"),
        ] {
            assert_eq!(
                span_error(json!({"flags": value})),
                format!("{SPAN}flags: {problem}")
            );
        }
    }

    #[test]
    fn integer_ranges_are_the_fields_own() {
        for (field, value, problem) in [
            ("flags", json!(4294967296u64), "4294967296 is out of range"),
            ("flags", json!("-1"), "-1 is out of range"),
            (
                "startTimeUnixNano",
                json!("18446744073709551616"),
                "18446744073709551616 is out of range",
            ),
            ("kind", json!(2147483648u64), "2147483648 is out of range"),
            ("kind", json!(-2147483649i64), "-2147483649 is out of range"),
            (
                "droppedEventsCount",
                json!(1e20),
                "100000000000000000000 is out of range",
            ),
        ] {
            assert_eq!(
                span_error(json!({field: value})),
                format!("{SPAN}{field}: {problem}")
            );
        }
        let span =
            one_span(json!({"startTimeUnixNano": 18446744073709551615u64, "kind": -2147483648i64}));
        assert_eq!((span.start_time_unix_nano, span.kind), (u64::MAX, i32::MIN));
        assert_eq!(
            value_error(json!({"intValue": 9223372036854775808u64})),
            format!("{ATTR}.intValue: 9223372036854775808 is out of range")
        );
        let record = json!({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"severityNumber": 2147483648u64}]}]}]});
        assert_eq!(
            logs(&record).unwrap_err(),
            "not a valid OTLP/JSON ExportLogsServiceRequest: \
             resourceLogs[0].scopeLogs[0].logRecords[0].severityNumber: 2147483648 is out of range"
        );
    }

    #[test]
    fn json_integers_past_64_bits_are_floats_as_orjson_reads_them() {
        let body = br#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": 18446744073709551617}]}]}]}"#;
        assert_eq!(
            traces_from_json(body, &mut Vec::new()).unwrap_err(),
            format!("{SPAN}startTimeUnixNano: 18446744073709551616 is out of range")
        );
        let body = br#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"flags": [123456789012345678901234567890]}]}]}]}"#;
        assert_eq!(
            traces_from_json(body, &mut Vec::new()).unwrap_err(),
            format!("{SPAN}flags: expected an integer, got [1.2345678901234568e+29]")
        );
    }

    #[test]
    fn a_negative_zero_integer_is_the_integer_zero() {
        let body = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"doubleValue":-0}}]}}]}"#;
        let request = traces_from_json(body, &mut Vec::new()).unwrap();
        let value = request.resource_spans[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes[0]
            .value
            .clone();
        let Some(any_value::Value::DoubleValue(d)) = value.unwrap().value else {
            panic!()
        };
        assert_eq!(d.to_bits(), 0);
        let body =
            br#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"flags": [-0, -0.0, 1E2,-0]}]}]}]}"#;
        assert_eq!(
            traces_from_json(body, &mut Vec::new()).unwrap_err(),
            format!("{SPAN}flags: expected an integer, got [0, -0.0, 100.0, 0]")
        );
    }

    #[test]
    fn enums_are_integers_or_their_names() {
        let span = one_span(
            json!({"kind": "SPAN_KIND_CONSUMER", "status": {"code": "STATUS_CODE_ERROR"}}),
        );
        assert_eq!((span.kind, span.status.unwrap().code), (5, 2));
        let span = one_span(json!({"kind": 7, "status": {"code": "1"}}));
        assert_eq!((span.kind, span.status.unwrap().code), (7, 1));
        assert_eq!(
            span_error(json!({"kind": "SERVER"})),
            format!("{SPAN}kind: expected an integer, got 'SERVER'")
        );
        // the names belong to their own field
        assert_eq!(
            span_error(json!({"kind": "STATUS_CODE_OK"})),
            format!("{SPAN}kind: expected an integer, got 'STATUS_CODE_OK'")
        );
    }

    #[test]
    fn ids_are_hex_and_a_non_hex_id_only_invalidates_its_span() {
        let span = one_span(
            json!({"traceId": " 0a f7 ", "spanId": "zz", "parentSpanId": "abc",
                                   "links": [{"traceId": "0g", "spanId": ""}]}),
        );
        assert_eq!(span.trace_id, [0x0a, 0xf7]);
        assert_eq!(span.span_id, b"");
        assert_eq!(span.parent_span_id, WRONG_LENGTH);
        assert_eq!(span.links[0].trace_id, WRONG_LENGTH);
        assert_eq!(span.links[0].span_id, b"");
        assert_eq!(
            span_error(json!({"spanId": 5})),
            format!("{SPAN}spanId: expected a hex string")
        );
        let doc = json!({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": TRACE_ID, "spanId": "zz"}]}]}]});
        let record = logs(&doc).unwrap().resource_logs[0].scope_logs[0].log_records[0].clone();
        assert_eq!(hex(&record.trace_id), TRACE_ID);
        assert_eq!(record.span_id, WRONG_LENGTH);
    }

    #[test]
    fn doubles_are_numbers_special_names_or_python_float_strings() {
        for (value, expected) in [
            (json!(2), 2.0),
            (json!(-1.5), -1.5),
            (json!("Infinity"), f64::INFINITY),
            (json!("-Infinity"), f64::NEG_INFINITY),
            (json!(" 1_0.5 "), 10.5),
            (json!("-inf"), f64::NEG_INFINITY),
            (
                json!(18446744073709551615u64),
                18446744073709551615u64 as f64,
            ),
        ] {
            assert_eq!(
                one_value(json!({"doubleValue": value})),
                Some(any_value::Value::DoubleValue(expected))
            );
        }
        let Some(any_value::Value::DoubleValue(nan)) = one_value(json!({"doubleValue": "NaN"}))
        else {
            panic!()
        };
        assert_eq!(nan.to_bits(), 0x7ff8_0000_0000_0000);
        for (value, shown) in [
            (json!(true), "True"),
            (json!("x"), "'x'"),
            (json!({}), "{}"),
        ] {
            assert_eq!(
                value_error(json!({"doubleValue": value})),
                format!("{ATTR}.doubleValue: expected a number, got {shown}")
            );
        }
    }

    #[test]
    fn bytes_are_standard_or_url_safe_base64_padded_or_not() {
        for text in ["QUJD-_8=", "QUJD+/8", "QUJD-_8"] {
            assert_eq!(
                one_value(json!({"bytesValue": text})),
                Some(any_value::Value::BytesValue(b"ABC\xfb\xff".to_vec()))
            );
        }
        for text in ["!", "Q", "QQ=Q", "é"] {
            assert_eq!(
                value_error(json!({"bytesValue": text})),
                format!("{ATTR}.bytesValue: expected base64")
            );
        }
        assert_eq!(
            value_error(json!({"bytesValue": 1})),
            format!("{ATTR}.bytesValue: expected a base64 string")
        );
    }

    #[test]
    fn the_first_value_member_present_decides() {
        assert_eq!(
            one_value(json!({"bytesValue": 1, "intValue": "7", "stringValue": null})),
            Some(any_value::Value::IntValue(7))
        );
        assert_eq!(one_value(json!({"unknown": 1})), None);
        assert_eq!(
            one_value(json!({"stringValue": ""})),
            Some(any_value::Value::StringValue(String::new()))
        );
        assert_eq!(
            value_error(json!({"stringValue": 5})),
            format!("{ATTR}.stringValue: expected a string")
        );
        assert_eq!(
            value_error(json!({"boolValue": "true"})),
            format!("{ATTR}.boolValue: expected true or false")
        );
        assert_eq!(
            value_error(json!([])),
            format!("{ATTR}: expected an AnyValue object")
        );
    }

    #[test]
    fn array_values_that_are_falsy_are_empty_and_kvlist_values_must_be_lists() {
        for falsy in [json!(0), json!(""), json!({}), json!(false), json!(0.0)] {
            assert_eq!(
                one_value(json!({"arrayValue": {"values": falsy}})),
                Some(any_value::Value::ArrayValue(ArrayValue::default()))
            );
        }
        assert_eq!(
            value_error(json!({"arrayValue": {"values": 1}})),
            format!("{ATTR}.arrayValue.values: expected a list")
        );
        assert_eq!(
            value_error(json!({"arrayValue": {"values": [{}, 5]}})),
            format!("{ATTR}.arrayValue[1]: expected an AnyValue object")
        );
        assert_eq!(
            value_error(json!({"arrayValue": 5})),
            format!("{ATTR}.arrayValue: expected an object")
        );
        assert_eq!(
            value_error(json!({"kvlistValue": {"values": 0}})),
            format!("{ATTR}.kvlistValue.values: expected a list")
        );
        assert_eq!(
            value_error(json!({"kvlistValue": []})),
            format!("{ATTR}.kvlistValue: expected an object")
        );
    }

    fn nested(levels: usize) -> Value {
        let mut value = json!({"intValue": 1});
        for _ in 0..levels {
            value = json!({"arrayValue": {"values": [value]}});
        }
        value
    }

    #[test]
    fn values_nest_64_levels_deep_and_no_deeper() {
        assert!(traces(&attr_doc(nested(64))).is_ok());
        let error = value_error(nested(65));
        let path = ".arrayValue[0]".repeat(65);
        assert_eq!(
            error,
            format!("{ATTR}{path}: values nested deeper than 64 levels")
        );
        let mut kv = json!({"intValue": 1});
        for _ in 0..65 {
            kv = json!({"kvlistValue": {"values": [{"key": "k", "value": kv}]}});
        }
        assert!(value_error(kv)
            .ends_with(".kvlistValue.values[0].value: values nested deeper than 64 levels"));
    }

    fn deep_document(levels: usize) -> Vec<u8> {
        let mut body = b"{\"x\":".to_vec();
        body.extend(std::iter::repeat_n(b'[', levels - 1));
        body.extend(std::iter::repeat_n(b']', levels - 1));
        body.push(b'}');
        body
    }

    #[test]
    fn documents_nest_1024_levels_deep_as_orjson_allows_and_no_deeper() {
        let mut ignored = Vec::new();
        assert!(traces_from_json(&deep_document(1024), &mut ignored).is_ok());
        assert_eq!(ignored, ["x"]);
        assert_eq!(
            traces_from_json(&deep_document(1025), &mut Vec::new()).unwrap_err(),
            "request body is not valid JSON: depth limit exceeded: line 1 column 1030 (char 1029)"
        );
        // far deeper input is refused before parsing, so it cannot exhaust the stack
        assert!(traces_from_json(&deep_document(1_000_000), &mut Vec::new()).is_err());
    }

    #[test]
    fn brackets_inside_strings_do_not_nest() {
        let mut body = b"{\"x\": \"".to_vec();
        body.extend(std::iter::repeat_n(b'[', 2000));
        body.extend_from_slice(b"\", \"y\": \"\\\"[[[\", \"z\": \"-0\"}");
        let mut ignored = Vec::new();
        assert!(traces_from_json(&body, &mut ignored).is_ok());
        assert_eq!(ignored, ["x", "y", "z"]);
    }

    #[test]
    fn every_prefix_of_a_body_is_read_or_refused_without_panicking() {
        let body = br#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a\"b\\", "kind": -0,
            "attributes": [{"key": "k", "value": {"arrayValue": {"values": [{"doubleValue": -0}]}}}]}]}]}]}"#;
        for end in 0..=body.len() {
            let _ = traces_from_json(&body[..end], &mut Vec::new());
        }
        assert!(traces_from_json(body, &mut Vec::new()).is_ok());
    }

    #[test]
    fn strings_are_moved_out_with_their_keys_and_duplicates_keep_the_last() {
        let body =
            br#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a", "name": "b"}]}]}]}"#;
        let request = traces_from_json(body, &mut Vec::new()).unwrap();
        assert_eq!(request.resource_spans[0].scope_spans[0].spans[0].name, "b");
        assert_eq!(
            traces_from_json(
                br#"{"resourceSpans": [{"scopeSpans": [{"spans": [{"flags": {"b": 1, "a": 2, "b": 3}}]}]}]}"#,
                &mut Vec::new()
            )
            .unwrap_err(),
            format!("{SPAN}flags: expected an integer, got {{'b': 3, 'a': 2}}")
        );
    }
}
