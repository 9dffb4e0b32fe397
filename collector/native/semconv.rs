//! GenAI / OpenInference / OpenLLMetry attributes to Sextant's normalized span columns.
//!
//! A port of `collector/normalize/semconv.py`, which stays the specification: the first
//! non-empty source wins (OTel GenAI, then OpenInference, then OpenLLMetry, then span-name
//! patterns), with Python's truthiness, `str()` and `is` checks reproduced. Tool arguments and
//! results are read with this module's own JSON reader, which follows orjson (what the Python
//! uses) where serde_json differs: `-0` is the integer 0, floats are correctly rounded, JSON
//! nesting is bounded without recursion; they are written back by `crate::json`, as orjson does.

// Until the span decoder calls in, only the tests use this module.

use serde_json::{Map, Number, Value};
use std::borrow::Cow;

use crate::json;
use crate::python::{self, PyInt};

/// A span's (or event's) attributes as decoded: keys in first-seen order, later duplicates win.
pub type Attrs = crate::attr_list::AttrList;

/// What the normalizer reads of one span event.
pub struct EventView<'a> {
    pub name: &'a str,
    pub attributes: &'a Attrs,
}

/// The normalized columns of one span, `step_kind` to `kept_as_text` in the store's order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Normalized {
    pub step_kind: &'static str,
    pub operation_name: Option<String>,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_arguments: Option<String>,
    pub tool_result: Option<String>,
    pub model: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub agent_name: Option<String>,
    pub conversation_id: Option<String>,
    pub user_id: Option<String>,
    pub error_type: Option<String>,
    pub kept_as_text: Option<Vec<String>>,
}

/// The argument keys, then the result keys (`TOOL_ARGUMENT_KEYS + TOOL_RESULT_KEYS`).
pub const TOOL_JSON_KEYS: [&str; 6] = [
    "gen_ai.tool.call.arguments",
    "input.value",
    "traceloop.entity.input",
    "gen_ai.tool.call.result",
    "output.value",
    "traceloop.entity.output",
];

/// JSON text nested deeper than this is kept as the text itself (and flagged), never as a value.
pub const MAX_JSON_DEPTH: usize = 128;
/// orjson refuses to read JSON nested deeper than this ("depth limit exceeded").
const ORJSON_MAX_DEPTH: usize = 1024;

const NAME_PREFIXES: [(&str, &str); 8] = [
    ("execute_tool ", "tool"),
    ("invoke_agent", "agent"),
    ("create_agent ", "agent"),
    ("handoff to ", "handoff"),
    ("chat ", "llm"),
    ("embeddings ", "embedding"),
    ("retrieval ", "retrieval"),
    ("apply_guardrail ", "guardrail"),
];
const NAME_SUFFIXES: [(&str, &str); 4] = [
    (".tool", "tool"),
    (".agent", "agent"),
    (".handoff", "handoff"),
    (".chat", "llm"),
];

fn operation_kind(label: &str) -> Option<&'static str> {
    Some(match label {
        "chat" | "generate_content" | "text_completion" => "llm",
        "embeddings" => "embedding",
        // OpenLLMetry's LangChain retrievers (`vector_db_retrieve {name}`)
        "retrieval" | "vector_db_retrieve" => "retrieval",
        "execute_tool" => "tool",
        "invoke_agent" | "create_agent" => "agent",
        "invoke_workflow" => "other",
        "apply_guardrail" | "guardrail_check" => "guardrail",
        "agent_handoff" | "handoff" => "handoff",
        _ => return None,
    })
}

const OPENINFERENCE_KINDS: [(&str, &str); 11] = [
    ("LLM", "llm"),
    ("EMBEDDING", "embedding"),
    ("RETRIEVER", "retrieval"),
    ("RERANKER", "retrieval"),
    ("TOOL", "tool"),
    ("AGENT", "agent"),
    ("GUARDRAIL", "guardrail"),
    ("CHAIN", "other"),
    ("EVALUATOR", "other"),
    ("PROMPT", "other"),
    ("UNKNOWN", "other"),
];

/// `OPENINFERENCE_KINDS.get(kind.upper(), "other")`. For ASCII text an ASCII case-insensitive
/// comparison is the same test without building the upper-cased copy; other text takes the full
/// Unicode mapping, as `str.upper` does ("guardraıl" with a dotless i is "GUARDRAIL").
fn openinference_kind(kind: &str) -> &'static str {
    let found = if kind.is_ascii() {
        OPENINFERENCE_KINDS
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(kind))
    } else {
        let upper = kind.to_uppercase();
        OPENINFERENCE_KINDS.iter().find(|(key, _)| *key == upper)
    };
    found.map_or("other", |(_, step)| step)
}

fn traceloop_kind(label: &str) -> Option<&'static str> {
    Some(match label {
        "agent" => "agent",
        "tool" => "tool",
        "handoff" => "handoff",
        "workflow" | "task" | "unknown" => "other",
        _ => return None,
    })
}

fn llm_request_kind(label: &str) -> Option<&'static str> {
    Some(match label {
        "chat" | "completion" => "llm",
        "embedding" => "embedding",
        "rerank" => "retrieval",
        _ => return None,
    })
}

/// Values instrumentations write when they do not know; treated as absent.
fn unknown_value(value: &str) -> bool {
    matches!(value, "" | "unknown" | "_OTHER")
}

/// Every attribute the rules read, found in one pass over the span's attributes: cheaper than
/// forty-odd hashed lookups, and nothing is allocated when a span carries none of them.
#[derive(Default)]
struct Probe<'a> {
    operation_name: Option<&'a Value>,
    openinference_kind: Option<&'a Value>,
    traceloop_kind: Option<&'a Value>,
    traceloop_entity: Option<&'a Value>,
    llm_request_type: Option<&'a Value>,
    mcp_method: Option<&'a Value>,
    error_type: Option<&'a Value>,
    tool_name: [Option<&'a Value>; 2],
    agent_name: [Option<&'a Value>; 2],
    tool_call_id: [Option<&'a Value>; 3],
    tool_json: [Option<&'a Value>; 6],
    model: [Option<&'a Value>; 6],
    input_tokens: [Option<&'a Value>; 3],
    output_tokens: [Option<&'a Value>; 3],
    conversation: [Option<&'a Value>; 7],
    user: [Option<&'a Value>; 5],
}

impl<'a> Probe<'a> {
    fn new(attrs: &'a Attrs) -> Self {
        let mut probe = Probe::default();
        for (key, value) in attrs {
            if let Some(slot) = probe.slot(key) {
                *slot = Some(value);
            }
        }
        probe
    }

    /// Where the value of `key` goes; the key tables above name the same keys in their order.
    fn slot(&mut self, key: &str) -> Option<&mut Option<&'a Value>> {
        Some(match key {
            "gen_ai.operation.name" => &mut self.operation_name,
            "openinference.span.kind" => &mut self.openinference_kind,
            "traceloop.span.kind" => &mut self.traceloop_kind,
            "traceloop.entity.name" => &mut self.traceloop_entity,
            "llm.request.type" => &mut self.llm_request_type,
            "mcp.method.name" => &mut self.mcp_method,
            "error.type" => &mut self.error_type,
            "gen_ai.tool.name" => &mut self.tool_name[0],
            "tool.name" => &mut self.tool_name[1],
            "gen_ai.agent.name" => &mut self.agent_name[0],
            "agent.name" => &mut self.agent_name[1],
            "gen_ai.tool.call.id" => &mut self.tool_call_id[0],
            "tool.id" => &mut self.tool_call_id[1],
            "jsonrpc.request.id" => &mut self.tool_call_id[2],
            "gen_ai.tool.call.arguments" => &mut self.tool_json[0],
            "input.value" => &mut self.tool_json[1],
            "traceloop.entity.input" => &mut self.tool_json[2],
            "gen_ai.tool.call.result" => &mut self.tool_json[3],
            "output.value" => &mut self.tool_json[4],
            "traceloop.entity.output" => &mut self.tool_json[5],
            "gen_ai.response.model" => &mut self.model[0],
            "gen_ai.request.model" => &mut self.model[1],
            "llm.response.model_name" => &mut self.model[2],
            "llm.model_name" => &mut self.model[3],
            "llm.request.model_name" => &mut self.model[4],
            "embedding.model_name" => &mut self.model[5],
            "gen_ai.usage.input_tokens" => &mut self.input_tokens[0],
            "gen_ai.usage.prompt_tokens" => &mut self.input_tokens[1],
            "llm.token_count.prompt" => &mut self.input_tokens[2],
            "gen_ai.usage.output_tokens" => &mut self.output_tokens[0],
            "gen_ai.usage.completion_tokens" => &mut self.output_tokens[1],
            "llm.token_count.completion" => &mut self.output_tokens[2],
            "gen_ai.conversation.id" => &mut self.conversation[0],
            "session.id" => &mut self.conversation[1],
            "traceloop.association.properties.session_id" => &mut self.conversation[2],
            "traceloop.association.properties.chat_id" => &mut self.conversation[3],
            "traceloop.association.properties.conversation_id" => &mut self.conversation[4],
            "traceloop.association.properties.thread_id" => &mut self.conversation[5],
            "mcp.session.id" => &mut self.conversation[6],
            "user.id" => &mut self.user[0],
            "traceloop.association.properties.user_id" => &mut self.user[1],
            "gen_ai.user" => &mut self.user[2],
            "llm.user" => &mut self.user[3],
            "enduser.id" => &mut self.user[4],
            _ => return None,
        })
    }
}

/// Every normalized column of one span.
pub fn normalized(
    attrs: &Attrs,
    name: &str,
    events: &[EventView<'_>],
    status_code: i32,
) -> Normalized {
    let probe = Probe::new(attrs);
    let kind = step_kind(&probe, name);
    let mut out = Normalized {
        step_kind: kind,
        operation_name: probe.operation_name.and_then(text),
        ..Normalized::default()
    };
    if kind == "tool" {
        out.tool_name = tool_name(&probe, name);
        let fields = tool_fields(&probe);
        (out.tool_call_id, out.tool_arguments, out.tool_result) = fields.ids_and_texts;
        out.kept_as_text = fields.kept_as_text;
    }
    out.model = model_name(&probe, name, kind);
    out.input_tokens = tokens(&probe.input_tokens);
    out.output_tokens = tokens(&probe.output_tokens);
    out.agent_name = agent_name(&probe, name, kind);
    out.conversation_id = first(&probe.conversation).and_then(text);
    out.user_id = first(&probe.user).and_then(text);
    out.error_type = error_type(probe.error_type, events, status_code);
    out
}

/// A value as the text column it fills (service.name, ...): None for null or "".
pub fn text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        other => Some(py_str(other)),
    }
}

/// Python's `str(value)`. Arrays and objects deviate: Python writes their repr
/// (`['a', None]`), this writes their compact JSON (`["a",null]`), which is what the value was
/// and what every other reader of these columns parses; reproducing repr's quoting and
/// escaping rules (which depend on Unicode printability) buys nothing.
pub fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(_) | Value::Object(_) => as_json_text(value),
        // str() of None, a bool or a number is its repr()
        scalar => python::repr(scalar),
    }
}

/// Python's `bool(value)`.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i != 0
            } else if let Some(u) = n.as_u64() {
                u != 0
            } else {
                n.as_f64().is_some_and(|x| x != 0.0)
            }
        }
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The first value that is not None and not "": `0`, `false` and `[]` are returned (and a
/// caller testing the result's truthiness then moves on to its next rule, not the next key).
fn first<'a>(values: &[Option<&'a Value>]) -> Option<&'a Value> {
    values
        .iter()
        .flatten()
        .copied()
        .find(|v| !is_none_or_empty(v))
}

fn first_index(values: &[Option<&Value>]) -> Option<usize> {
    values
        .iter()
        .position(|v| v.is_some_and(|v| !is_none_or_empty(v)))
}

fn is_none_or_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// A string attribute used as a lookup key; any other type (a list, a number) is "".
fn label(value: Option<&Value>) -> &str {
    match value {
        Some(Value::String(s)) => s,
        _ => "",
    }
}

fn step_kind(probe: &Probe<'_>, name: &str) -> &'static str {
    if let Some(kind) = operation_kind(label(probe.operation_name)) {
        return kind;
    }
    if let Some(oi) = probe.openinference_kind.filter(|v| truthy(v)) {
        // `str(oi).upper()` of anything but a string (a number, a list) names no kind.
        let kind = match oi {
            Value::String(s) => openinference_kind(s),
            _ => "other",
        };
        if kind == "tool" && name.starts_with("handoff to ") {
            return "handoff";
        }
        return kind;
    }
    if let Some(kind) = traceloop_kind(label(probe.traceloop_kind)) {
        return kind;
    }
    if let Some(kind) = llm_request_kind(label(probe.llm_request_type)) {
        return kind;
    }
    if matches!(probe.mcp_method, Some(Value::String(s)) if s == "tools/call") {
        return "tool";
    }
    for (prefix, kind) in NAME_PREFIXES {
        if name.starts_with(prefix) {
            return kind;
        }
    }
    for (suffix, kind) in NAME_SUFFIXES {
        if name.ends_with(suffix) {
            return kind;
        }
    }
    "other"
}

fn is_string(value: Option<&Value>, expected: &str) -> bool {
    matches!(value, Some(Value::String(s)) if s == expected)
}

fn tool_name(probe: &Probe<'_>, name: &str) -> Option<String> {
    if let Some(found) = first(&probe.tool_name).filter(|v| truthy(v)) {
        return Some(py_str(found));
    }
    if is_string(probe.traceloop_kind, "tool") {
        if let Some(entity) = probe.traceloop_entity.filter(|v| truthy(v)) {
            return Some(py_str(entity));
        }
    }
    let rest = name
        .strip_prefix("execute_tool ")
        // MCP: `tools/call {tool}`, and the Python SDK's client `MCP send tools/call {tool}`
        .or_else(|| name.split_once("tools/call ").map(|(_, tool)| tool))
        .or_else(|| name.strip_suffix(".tool"));
    match rest {
        Some(rest) => Some(rest.to_owned()),
        None if name.is_empty() => None,
        None => Some(name.to_owned()),
    }
}

fn agent_name(probe: &Probe<'_>, name: &str, kind: &str) -> Option<String> {
    if let Some(found) = first(&probe.agent_name).filter(|v| truthy(v)) {
        return Some(py_str(found));
    }
    if is_string(probe.traceloop_kind, "agent") {
        if let Some(entity) = probe.traceloop_entity.filter(|v| truthy(v)) {
            return Some(py_str(entity));
        }
    }
    if kind != "agent" {
        return None;
    }
    let rest = name
        .strip_prefix("invoke_agent ")
        .or_else(|| name.strip_prefix("create_agent "))
        .or_else(|| name.strip_suffix(".agent"));
    if let Some(rest) = rest {
        return Some(rest.to_owned());
    }
    if probe.openinference_kind.is_some_and(truthy) && !name.is_empty() {
        return Some(name.to_owned());
    }
    None
}

fn model_name(probe: &Probe<'_>, name: &str, kind: &str) -> Option<String> {
    for value in probe.model {
        let value = label(value);
        if !unknown_value(value) {
            return Some(value.to_owned());
        }
    }
    match name.strip_prefix("chat ") {
        Some(rest) if kind == "llm" && !unknown_value(rest) => Some(rest.to_owned()),
        _ => None,
    }
}

const INT64_MAX_AS_F64: f64 = 9_223_372_036_854_775_808.0; // 2**63, the first float past i64

/// A token count as an int64, as Python's `int(value)` reads it; nonsense (negative, huge, not a
/// number, a bool) is None.
fn tokens(values: &[Option<&Value>]) -> Option<i64> {
    match first(values)? {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                (i >= 0).then_some(i)
            } else if n.is_u64() {
                None // above i64::MAX
            } else {
                // int() truncates toward zero: -0.5 is 0, 1e30 is out of range.
                let x = n.as_f64()?.trunc();
                (0.0..INT64_MAX_AS_F64).contains(&x).then_some(x as i64)
            }
        }
        Value::String(s) => py_int(s),
        _ => None,
    }
}

/// Python's `int(text)` limited to 0..=i64::MAX; anything else is None.
pub fn py_int(text: &str) -> Option<i64> {
    match python::parse_int(text)? {
        PyInt::Small(value) => i64::try_from(value).ok().filter(|v| *v >= 0),
        PyInt::Big(_) => None,
    }
}

fn error_type(found: Option<&Value>, events: &[EventView<'_>], status_code: i32) -> Option<String> {
    if let Some(found) = found.filter(|v| truthy(v)) {
        return text(found);
    }
    if status_code != 2 {
        return None;
    }
    events
        .iter()
        .filter(|event| event.name == "exception")
        .find_map(|event| event.attributes.get("exception.type").filter(|v| truthy(v)))
        .and_then(text)
}

struct ToolFields {
    ids_and_texts: (Option<String>, Option<String>, Option<String>),
    kept_as_text: Option<Vec<String>>,
}

static NULL: Value = Value::Null;

/// What a check of a tool attribute found.
#[derive(Clone, Copy, PartialEq)]
enum Checked {
    /// `parse_json` gives the value itself: not JSON-looking text, or not JSON.
    Same,
    /// JSON kept as text because it nests too deep (also the value itself).
    TooDeep,
    /// Valid JSON that no rule looks into (an array, or an object without envelope keys): every
    /// rule leaves it as it is, so it is never built.
    Plain,
    /// Valid JSON the rules read: a string, or an object with envelope keys.
    Envelope,
}

fn check_tool_json(value: &Value) -> Checked {
    match value {
        Value::String(text) if json_looking(text) => match check_json(text) {
            None => Checked::Same,
            Some(Outcome::TooDeep) => Checked::TooDeep,
            Some(Outcome::Valid { looked_into: false }) => Checked::Plain,
            Some(_) => Checked::Envelope,
        },
        _ => Checked::Same,
    }
}

/// A tool attribute as `parse_json` leaves it, as far as the rules need it.
enum ToolJson<'a> {
    /// The value itself.
    Same(&'a Value),
    /// The decoded JSON (of an object, only what the rules read).
    Decoded(Value),
    Plain,
}

impl<'a> ToolJson<'a> {
    fn new(value: &'a Value, checked: Checked) -> Self {
        let decoded = match (checked, value) {
            (Checked::Envelope, Value::String(text)) if text.starts_with('"') => {
                match read_json(text) {
                    Read::Value(decoded) => Some(decoded),
                    _ => None,
                }
            }
            (Checked::Envelope, Value::String(text)) => read_envelope(text),
            (Checked::Plain, _) => return ToolJson::Plain,
            _ => return ToolJson::Same(value),
        };
        debug_assert!(decoded.is_some(), "text checked as JSON reads as JSON");
        decoded.map_or(ToolJson::Same(value), ToolJson::Decoded)
    }

    /// What `parse_json` returned; None for `Plain`, which no rule needs.
    fn value(&self) -> Option<&Value> {
        match self {
            ToolJson::Same(value) => Some(value),
            ToolJson::Decoded(value) => Some(value),
            ToolJson::Plain => None,
        }
    }
}

/// (call id, arguments as JSON text, result text) of a tool span, and the tool keys whose JSON
/// is kept as text. Every tool key's text is checked; only the arguments and the result chosen
/// are decoded, and of an object only what the rules read.
fn tool_fields(probe: &Probe<'_>) -> ToolFields {
    // Instrumentations often write the same JSON under two keys: it is checked once.
    let mut checked: [Option<Checked>; 6] = [None; 6];
    for (i, value) in probe.tool_json.iter().enumerate() {
        let Some(value) = value else { continue };
        let same = (0..i).find(|&j| value.is_string() && probe.tool_json[j] == Some(value));
        checked[i] = Some(
            same.and_then(|j| checked[j])
                .unwrap_or_else(|| check_tool_json(value)),
        );
    }
    let kept: Vec<String> = TOOL_JSON_KEYS
        .iter()
        .zip(&checked)
        .filter(|(_, checked)| **checked == Some(Checked::TooDeep))
        .map(|(key, _)| (*key).to_owned())
        .collect();

    let arg_at = first_index(&probe.tool_json[..3]);
    let result_at = first_index(&probe.tool_json[3..]).map(|i| i + 3);
    let raw_args = arg_at.and_then(|i| probe.tool_json[i]);
    let raw_result = result_at.and_then(|i| probe.tool_json[i]);
    let parsed = |at: Option<usize>| {
        let i = at?;
        Some(ToolJson::new(probe.tool_json[i]?, checked[i]?))
    };
    let parsed_args = parsed(arg_at);
    let parsed_result = parsed(result_at);
    let (parsed_args, parsed_result) = (parsed_args.as_ref(), parsed_result.as_ref());

    let call_id = match first(&probe.tool_call_id) {
        Some(id) => Some(py_str(id)),
        None => parsed_args
            .and_then(ToolJson::value)
            .and_then(message_call_id)
            .or_else(|| {
                parsed_result
                    .and_then(ToolJson::value)
                    .and_then(message_call_id)
            }),
    };

    let arguments = match (raw_args, parsed_args) {
        (Some(raw), Some(parsed)) => Some(match parsed.value() {
            None => py_str(raw), // Plain: JSON text, kept verbatim
            Some(value) => match unwrap_arguments(value) {
                Some(args) => as_json_text(&args),
                // `args is parsed_args`: JSON text is kept verbatim; a bare string (or text
                // kept because it is not JSON) becomes a JSON string; any other value is encoded.
                None => match (raw, parsed) {
                    (Value::String(raw), ToolJson::Decoded(_)) => raw.clone(),
                    _ => as_json_text(raw),
                },
            },
        }),
        _ => None,
    };

    let result = match (raw_result, parsed_result) {
        (Some(raw), Some(parsed)) => match parsed.value() {
            None => Some(py_str(raw)), // Plain: JSON text, kept verbatim
            Some(value) => match unwrap_result(value) {
                // `result is parsed_result`: a string as it is, JSON text verbatim, else encoded.
                None => match (raw, value) {
                    (_, Value::String(s)) => Some(s.clone()),
                    (Value::String(raw), _) => Some(raw.clone()),
                    (_, other) => Some(as_json_text(other)),
                },
                Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(as_json_text(other)),
            },
        },
        _ => None,
    };

    ToolFields {
        ids_and_texts: (call_id, arguments, result),
        kept_as_text: (!kept.is_empty()).then_some(kept),
    }
}

/// Strip the LangChain callback and decorator envelopes OpenLLMetry puts around arguments.
/// None is the value itself (not an envelope; or `args` with `kwargs` that are not an object,
/// which cannot be merged and stay as they came).
pub fn unwrap_arguments(value: &Value) -> Option<Cow<'_, Value>> {
    let Value::Object(map) = value else {
        return None;
    };
    if map.contains_key("inputs") && (map.contains_key("input_str") || map.contains_key("tags")) {
        return Some(Cow::Borrowed(&map["inputs"]));
    }
    if let Some(input) = map.get("input_str") {
        return Some(json_or_text(input).0);
    }
    if let Some(kwargs) = map.get("kwargs") {
        if map.keys().all(|k| k == "args" || k == "kwargs") {
            let args = map.get("args").filter(|a| truthy(a));
            let Some(args) = args else {
                return Some(Cow::Borrowed(kwargs));
            };
            // {"args": args, **kwargs}: a later "args" in kwargs replaces it in place.
            let Value::Object(kwargs) = kwargs else {
                return None;
            };
            let mut merged = Map::with_capacity(kwargs.len() + 1);
            merged.insert("args".to_owned(), args.clone());
            for (k, v) in kwargs {
                merged.insert(k.clone(), v.clone());
            }
            return Some(Cow::Owned(Value::Object(merged)));
        }
    }
    None
}

/// The content of a serialized LangChain ToolMessage, which both OpenInference and OpenLLMetry
/// store in place of the tool's return value. None is Python returning the value itself;
/// `Some(&Value::Null)` stands for Python's None (a missing or null content).
pub fn unwrap_result(value: &Value) -> Option<&Value> {
    let Value::Object(map) = value else {
        return None;
    };
    let mut current = value;
    let mut unwrapped = false;
    if let Some(output) = map.get("output") {
        if map.keys().all(|k| k == "output" || k == "kwargs") {
            current = output;
            unwrapped = true;
        }
    }
    if let Value::Object(map) = current {
        let inner = if map.get("lc").is_some_and(truthy) {
            map.get("kwargs")
        } else {
            map.get("data")
        };
        if let Some(Value::Object(inner)) = inner {
            if matches!(map.get("type"), Some(Value::String(t)) if t == "tool" || t == "constructor")
            {
                return Some(inner.get("content").unwrap_or(&NULL));
            }
        }
    }
    unwrapped.then_some(current)
}

/// The tool-call id carried inside a callback envelope or a serialized ToolMessage.
pub fn message_call_id(value: &Value) -> Option<String> {
    let Value::Object(map) = value else {
        return None;
    };
    for key in ["kwargs", "output", "data"] {
        if let Some(holder @ Value::Object(inner)) = map.get(key) {
            if let Some(id) = inner.get("tool_call_id").filter(|v| truthy(v)) {
                return Some(py_str(id));
            }
            if let Some(nested) = message_call_id(holder) {
                return Some(nested);
            }
        }
    }
    None
}

/// A JSON-looking string (one starting with `{`, `[` or `"`) decoded, anything else as it is
/// (`Cow::Borrowed`); and whether it is JSON kept as text because it nests too deep: more than
/// `MAX_JSON_DEPTH` levels, or so deep that orjson refuses it.
pub fn json_or_text(value: &Value) -> (Cow<'_, Value>, bool) {
    let Value::String(text) = value else {
        return (Cow::Borrowed(value), false);
    };
    if !json_looking(text) {
        return (Cow::Borrowed(value), false);
    }
    match read_json(text) {
        Read::Value(parsed) => (Cow::Owned(parsed), false),
        Read::Invalid => (Cow::Borrowed(value), false),
        Read::TooDeep => (Cow::Borrowed(value), true),
    }
}

fn json_looking(text: &str) -> bool {
    matches!(text.as_bytes().first(), Some(b'{' | b'[' | b'"'))
}

/// A JSON-looking string decoded; anything else (or JSON nested too deep) as it is.
#[cfg(test)]
pub fn parse_json(value: &Value) -> Cow<'_, Value> {
    json_or_text(value).0
}

/// What reading a JSON text gave.
#[derive(Debug, PartialEq)]
pub enum Read {
    Value(Value),
    /// Not JSON (orjson raises, and not for depth).
    Invalid,
    /// JSON with containers more than `MAX_JSON_DEPTH` levels deep, or text that reaches
    /// orjson's depth limit before it stops being JSON.
    TooDeep,
}

/// A container being read: its items so far, or nothing once the text is known to be too deep
/// (or when only checking).
enum Open {
    Array(Vec<Value>),
    Object(Map<String, Value>, String),
    Skipped { object: bool },
}

/// What reading gave, building the value or only checking the text.
enum Outcome {
    Value(Value),
    /// Valid JSON, checked only: whether the value may matter beyond being valid JSON (it is a
    /// string, or an object with a top-level key the envelope rules look at).
    Valid {
        looked_into: bool,
    },
    TooDeep,
}

/// Reads JSON text as orjson does, without recursion: RFC 8259 strictly (no NaN, no trailing
/// commas, no comments), integers as i64 or u64 and wider ones as floats (`-0` is the integer 0),
/// a number that overflows a float is an error, duplicate keys keep the first position and the
/// last value. Past `MAX_JSON_DEPTH` the values are no longer built, only checked; at
/// orjson's own limit the text is refused as orjson refuses it, wherever it would go on.
///
/// One known difference: for text that is not JSON but opens more than 1024 containers before
/// its first error, orjson may instead run out of the buffer it sized from the text's length
/// ("failed to allocate memory"), which Python does not flag; this flags it like the depth
/// error orjson gives when the buffer suffices.
pub fn read_json(text: &str) -> Read {
    match Reader::new(text).read(Mode::Build) {
        Some(Outcome::Value(value)) => Read::Value(value),
        Some(Outcome::TooDeep) => Read::TooDeep,
        Some(Outcome::Valid { .. }) | None => Read::Invalid,
    }
}

/// `read_json` without building the value (nothing is allocated): None is not JSON.
fn check_json(text: &str) -> Option<Outcome> {
    Reader::new(text).read(Mode::Check)
}

/// A JSON object (checked valid, not too deep) with only the values the envelope rules read
/// built; the others are null, standing in for values no rule looks at (their keys are kept,
/// the rules test the set of keys).
fn read_envelope(text: &str) -> Option<Value> {
    match Reader::new(text).read(Mode::Envelope)? {
        Outcome::Value(value) => Some(value),
        _ => None,
    }
}

/// What `unwrap_arguments`, `unwrap_result` and `message_call_id` read of a top-level object.
fn envelope_value(key: &str) -> bool {
    matches!(
        key,
        "inputs" | "input_str" | "args" | "kwargs" | "output" | "lc" | "type" | "data"
    )
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Build,
    Check,
    /// Builds the top-level object's keys and its `envelope_value`s.
    Envelope,
}

/// The top-level keys `unwrap_arguments`, `unwrap_result` and `message_call_id` act on: an object
/// with none of them is left as it is by all three.
fn envelope_key(key: &str) -> bool {
    matches!(key, "inputs" | "input_str" | "kwargs" | "output" | "data")
}

/// The index of the first byte from `from` on that a JSON string cannot hold as it is (a quote,
/// a backslash or a control character), or the end. Found with memchr and a branch-free pass
/// instead of a byte at a time: messages and tool results are kilobytes of plain text.
fn plain_end(bytes: &[u8], from: usize) -> usize {
    let rest = &bytes[from..];
    let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    let run = &rest[..stop];
    if run.iter().fold(false, |control, &b| control | (b < 0x20)) {
        from + run.iter().position(|&b| b < 0x20).unwrap_or(stop)
    } else {
        from + stop
    }
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Reader {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek() == Some(byte)).then(|| self.pos += 1)
    }

    /// None is "not JSON". When checking, nothing is built and valid text is `Valid`.
    fn read(&mut self, mode: Mode) -> Option<Outcome> {
        let mut stack: Vec<Open> = Vec::new();
        let mut building = mode != Mode::Check;
        let mut too_deep = false;
        let mut looked_into = false;
        self.skip_ws();
        'value: loop {
            let mut value = match self.peek()? {
                open @ (b'[' | b'{') => {
                    self.pos += 1;
                    let depth = stack.len() + 1;
                    if depth > ORJSON_MAX_DEPTH {
                        return Some(Outcome::TooDeep);
                    }
                    if depth > MAX_JSON_DEPTH && !too_deep {
                        too_deep = true;
                        building = false;
                        for frame in &mut stack {
                            let object =
                                matches!(frame, Open::Object(..) | Open::Skipped { object: true });
                            *frame = Open::Skipped { object };
                        }
                    }
                    self.skip_ws();
                    let object = open == b'{';
                    let close = if object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        match (building, object) {
                            (false, _) => Value::Null,
                            (true, true) => Value::Object(Map::new()),
                            (true, false) => Value::Array(Vec::new()),
                        }
                    } else {
                        stack.push(match (building, object) {
                            (false, object) => Open::Skipped { object },
                            (true, true) => Open::Object(Map::new(), String::new()),
                            (true, false) => Open::Array(Vec::new()),
                        });
                        if object {
                            let top = depth == 1;
                            let open = stack.last_mut()?;
                            self.key(open, top, &mut looked_into)?;
                            if mode == Mode::Envelope && top {
                                building =
                                    matches!(open, Open::Object(_, key) if envelope_value(key));
                            }
                        }
                        continue 'value;
                    }
                }
                b'"' if building => Value::String(self.string()?),
                b'"' => {
                    looked_into |= stack.is_empty();
                    self.skip_string()?;
                    Value::Null
                }
                b'-' | b'0'..=b'9' => Value::Number(self.number()?),
                b't' => self.literal("true", Value::Bool(true))?,
                b'f' => self.literal("false", Value::Bool(false))?,
                b'n' => self.literal("null", Value::Null)?,
                _ => return None,
            };
            // A value is complete: add it to its container, then see what follows.
            loop {
                let top = stack.len() == 1;
                let Some(open) = stack.last_mut() else {
                    self.skip_ws();
                    if self.pos != self.bytes.len() {
                        return None;
                    }
                    return Some(match (too_deep, mode) {
                        (true, _) => Outcome::TooDeep,
                        (false, Mode::Check) => Outcome::Valid { looked_into },
                        (false, _) => Outcome::Value(value),
                    });
                };
                let object = match open {
                    Open::Array(items) => {
                        items.push(value);
                        false
                    }
                    Open::Object(map, key) => {
                        map.insert(std::mem::take(key), value);
                        true
                    }
                    Open::Skipped { object } => *object,
                };
                self.skip_ws();
                match (self.peek()?, object) {
                    (b',', _) => {
                        self.pos += 1;
                        self.skip_ws();
                        if object {
                            self.key(open, top, &mut looked_into)?;
                            if mode == Mode::Envelope && top {
                                building =
                                    matches!(open, Open::Object(_, key) if envelope_value(key));
                            }
                        }
                        continue 'value;
                    }
                    (b']', false) | (b'}', true) => {
                        self.pos += 1;
                        value = match stack.pop()? {
                            Open::Array(items) => Value::Array(items),
                            Open::Object(map, _) => Value::Object(map),
                            Open::Skipped { .. } => Value::Null,
                        };
                    }
                    _ => return None,
                }
            }
        }
    }

    /// An object key and its colon, kept as the object's pending key when it is being built
    /// (else only checked, noting a top-level envelope key); the reader is left at the value.
    fn key(&mut self, open: &mut Open, top: bool, looked_into: &mut bool) -> Option<()> {
        if self.peek() != Some(b'"') {
            return None;
        }
        if let Open::Object(_, pending) = open {
            *pending = self.string()?;
        } else {
            // A key with escapes is not compared: it counts as one the rules may look at.
            let raw = self.skip_string()?;
            *looked_into |= top && raw.is_none_or(envelope_key);
        }
        self.skip_ws();
        self.expect(b':')?;
        self.skip_ws();
        Some(())
    }

    fn literal(&mut self, word: &str, value: Value) -> Option<Value> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Some(value)
        } else {
            None
        }
    }

    fn string(&mut self) -> Option<String> {
        self.pos += 1; // the opening quote
        let mut out = String::new();
        let mut start = self.pos;
        loop {
            self.pos = plain_end(self.bytes, self.pos);
            match self.peek()? {
                b'"' => {
                    out.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    return Some(out);
                }
                b'\\' => {
                    out.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    let escaped = self.peek()?;
                    self.pos += 1;
                    out.push(match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.escaped_char()?,
                        _ => return None,
                    });
                    start = self.pos;
                }
                _ => return None, // a control character
            }
        }
    }

    /// Checks a string without building it: its raw text when it has no escapes.
    fn skip_string(&mut self) -> Option<Option<&'a str>> {
        self.pos += 1; // the opening quote
        let start = self.pos;
        let mut plain = true;
        loop {
            self.pos = plain_end(self.bytes, self.pos);
            match self.peek()? {
                b'"' => {
                    let raw = &self.text[start..self.pos];
                    self.pos += 1;
                    return Some(plain.then_some(raw));
                }
                b'\\' => {
                    plain = false;
                    self.pos += 1;
                    let escaped = self.peek()?;
                    self.pos += 1;
                    match escaped {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            self.escaped_char()?;
                        }
                        _ => return None,
                    }
                }
                _ => return None, // a control character
            }
        }
    }

    /// The character of a `\uXXXX` escape (the `\u` read), a surrogate pair taking two.
    fn escaped_char(&mut self) -> Option<char> {
        let unit = self.hex4()?;
        match unit {
            0xd800..=0xdbff => {
                if !self.bytes[self.pos..].starts_with(b"\\u") {
                    return None;
                }
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return None;
                }
                char::from_u32(0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00))
            }
            0xdc00..=0xdfff => None,
            _ => char::from_u32(unit),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4)?;
        let mut unit = 0;
        for &d in digits {
            unit = unit * 16 + char::from(d).to_digit(16)?;
        }
        self.pos += 4;
        Some(unit)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Option<Number> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return None;
            }
            integer = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
            integer = false;
        }
        let token = &self.text[start..self.pos];
        if integer {
            let fits = if negative {
                token.parse::<i64>().ok().map(Number::from)
            } else {
                token.parse::<u64>().ok().map(Number::from)
            };
            if fits.is_some() {
                return fits;
            }
        }
        // Rust's float parsing rounds correctly, as orjson's does; infinity is an error.
        let x: f64 = token.parse().ok()?;
        Number::from_f64(x)
    }
}

/// The compact JSON text of a value, as `orjson.dumps` writes it.
pub fn as_json_text(value: &Value) -> String {
    let mut out = Vec::new();
    json::write_value(&mut out, value);
    String::from_utf8(out).expect("JSON of UTF-8 strings is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_end_at_their_quote_and_control_characters_are_refused() {
        let long = "x".repeat(100);
        let text = format!("[\"{long}\\\"{long}\", \"\\u00e9{long}\"]");
        let expected = json!([format!("{long}\"{long}"), format!("é{long}")]);
        assert_eq!(read_json(&text), Read::Value(expected));
        for bad in ["[\"a\tb\"]", "[\"a\u{1}\"]", "[\"abc", "[\"abc\\"] {
            assert_eq!(read_json(bad), Read::Invalid, "{bad:?}");
        }
    }

    // The precedence lists of semconv.md § 6, which `Probe::slot` encodes; the tests check it.
    const MODEL_KEYS: [&str; 6] = [
        "gen_ai.response.model",
        "gen_ai.request.model",
        "llm.response.model_name",
        "llm.model_name",
        "llm.request.model_name",
        "embedding.model_name",
    ];
    const INPUT_TOKEN_KEYS: [&str; 3] = [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
    ];
    const OUTPUT_TOKEN_KEYS: [&str; 3] = [
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
    ];
    const CONVERSATION_KEYS: [&str; 7] = [
        "gen_ai.conversation.id",
        "session.id",
        "traceloop.association.properties.session_id",
        "traceloop.association.properties.chat_id",
        "traceloop.association.properties.conversation_id",
        "traceloop.association.properties.thread_id",
        "mcp.session.id",
    ];
    const USER_KEYS: [&str; 5] = [
        "user.id",
        "traceloop.association.properties.user_id",
        "gen_ai.user",
        "llm.user",
        "enduser.id",
    ];
    const TOOL_NAME_KEYS: [&str; 2] = ["gen_ai.tool.name", "tool.name"];
    const AGENT_NAME_KEYS: [&str; 2] = ["gen_ai.agent.name", "agent.name"];
    const TOOL_CALL_ID_KEYS: [&str; 3] = ["gen_ai.tool.call.id", "tool.id", "jsonrpc.request.id"];

    fn attrs(value: Value) -> Attrs {
        match value {
            Value::Object(map) => map.into(),
            _ => panic!("attributes are an object"),
        }
    }

    fn norm(value: Value, name: &str) -> Normalized {
        normalized(&attrs(value), name, &[], 0)
    }

    fn tool(value: Value) -> Normalized {
        let mut map = attrs(value);
        map.insert("gen_ai.operation.name".into(), json!("execute_tool"));
        normalized(&map, "t", &[], 0)
    }

    fn read(text: &str) -> Read {
        read_json(text)
    }

    fn flagged(text: &str) -> bool {
        json_or_text(&json!(text)).1
    }

    fn nested(open: &str, inner: &str, close: &str, depth: usize) -> String {
        format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
    }

    // Python truthiness, first(), text() and str().

    #[test]
    fn truthy_follows_python_bool() {
        for falsy in [
            json!(null),
            json!(false),
            json!(0),
            json!(0.0),
            json!(-0.0),
            json!(""),
            json!([]),
            json!({}),
        ] {
            assert!(!truthy(&falsy), "{falsy}");
        }
        for value in [
            json!(true),
            json!(1),
            json!(-1),
            json!(0.5),
            json!("0"),
            json!([0]),
            json!({"a": null}),
        ] {
            assert!(truthy(&value), "{value}");
        }
    }

    #[test]
    fn first_skips_only_null_and_empty_string() {
        let (null, empty, zero, no) = (json!(null), json!(""), json!(0), json!(false));
        assert_eq!(
            first(&[None, Some(&null), Some(&empty), Some(&zero)]),
            Some(&zero)
        );
        assert_eq!(first(&[Some(&no), Some(&zero)]), Some(&no));
        assert_eq!(first(&[Some(&empty), None]), None);
    }

    #[test]
    fn a_falsy_first_value_moves_to_the_next_rule_not_the_next_key() {
        let out = tool(json!({"gen_ai.tool.name": 0, "tool.name": "second"}));
        assert_eq!(out.tool_name.as_deref(), Some("t"));
        let out = norm(
            json!({"gen_ai.agent.name": [], "agent.name": "second"}),
            "x",
        );
        assert_eq!(out.agent_name, None);
        let out = norm(
            json!({"gen_ai.usage.input_tokens": false, "llm.token_count.prompt": 5}),
            "x",
        );
        assert_eq!(out.input_tokens, None);
    }

    #[test]
    fn text_of_null_and_empty_string_is_none() {
        assert_eq!(text(&json!(null)), None);
        assert_eq!(text(&json!("")), None);
        assert_eq!(text(&json!("svc")).as_deref(), Some("svc"));
    }

    #[test]
    fn text_of_scalars_is_python_str() {
        assert_eq!(text(&json!(0)).as_deref(), Some("0"));
        assert_eq!(text(&json!(-42)).as_deref(), Some("-42"));
        assert_eq!(text(&json!(true)).as_deref(), Some("True"));
        assert_eq!(text(&json!(false)).as_deref(), Some("False"));
        assert_eq!(text(&json!(5.0)).as_deref(), Some("5.0"));
        assert_eq!(text(&json!(-0.0)).as_deref(), Some("-0.0"));
    }

    #[test]
    fn text_of_arrays_and_objects_is_compact_json() {
        assert_eq!(
            text(&json!(["a", null, 1.5])).as_deref(),
            Some(r#"["a",null,1.5]"#)
        );
        assert_eq!(
            text(&json!({"k": [true]})).as_deref(),
            Some(r#"{"k":[true]}"#)
        );
    }

    // step_kind.

    #[test]
    fn operation_name_decides_the_kind_first() {
        let out = norm(
            json!({"gen_ai.operation.name": "execute_tool", "openinference.span.kind": "LLM"}),
            "chat x",
        );
        assert_eq!(out.step_kind, "tool");
        assert_eq!(
            norm(
                json!({"gen_ai.operation.name": "invoke_workflow"}),
                "chat x"
            )
            .step_kind,
            "other"
        );
        assert_eq!(
            norm(json!({"gen_ai.operation.name": "agent_handoff"}), "").step_kind,
            "handoff"
        );
    }

    #[test]
    fn unknown_or_non_string_operation_name_falls_through() {
        assert_eq!(
            norm(json!({"gen_ai.operation.name": "dance"}), "chat x").step_kind,
            "llm"
        );
        assert_eq!(
            norm(json!({"gen_ai.operation.name": ["chat"]}), "x.tool").step_kind,
            "tool"
        );
        let out = norm(json!({"gen_ai.operation.name": 7}), "");
        assert_eq!(
            (out.step_kind, out.operation_name.as_deref()),
            ("other", Some("7"))
        );
    }

    #[test]
    fn openinference_kind_is_upper_cased() {
        assert_eq!(
            norm(json!({"openinference.span.kind": "llm"}), "").step_kind,
            "llm"
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": "ReRanker"}), "").step_kind,
            "retrieval"
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": "guardraıl"}), "").step_kind,
            "guardrail"
        );
    }

    #[test]
    fn openinference_kind_unknown_or_not_a_string_is_other() {
        assert_eq!(
            norm(json!({"openinference.span.kind": "weird"}), "chat x").step_kind,
            "other"
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": 1}), "chat x").step_kind,
            "other"
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": ["LLM"]}), "chat x").step_kind,
            "other"
        );
    }

    #[test]
    fn falsy_openinference_kind_falls_through() {
        for falsy in [json!(""), json!(0), json!(false), json!([])] {
            let out = norm(
                json!({"openinference.span.kind": falsy, "traceloop.span.kind": "tool"}),
                "",
            );
            assert_eq!(out.step_kind, "tool");
        }
    }

    #[test]
    fn openinference_tool_named_handoff_is_a_handoff() {
        assert_eq!(
            norm(json!({"openinference.span.kind": "TOOL"}), "handoff to b").step_kind,
            "handoff"
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": "AGENT"}), "handoff to b").step_kind,
            "agent"
        );
    }

    #[test]
    fn traceloop_then_llm_request_type_then_mcp() {
        assert_eq!(
            norm(
                json!({"traceloop.span.kind": "workflow", "llm.request.type": "chat"}),
                ""
            )
            .step_kind,
            "other"
        );
        assert_eq!(
            norm(
                json!({"traceloop.span.kind": "Tool", "llm.request.type": "rerank"}),
                ""
            )
            .step_kind,
            "retrieval"
        );
        assert_eq!(
            norm(json!({"llm.request.type": "embedding"}), "").step_kind,
            "embedding"
        );
        assert_eq!(
            norm(json!({"mcp.method.name": "tools/call"}), "").step_kind,
            "tool"
        );
        assert_eq!(
            norm(json!({"mcp.method.name": "tools/list"}), "").step_kind,
            "other"
        );
        let retriever = json!({"gen_ai.operation.name": "vector_db_retrieve",
                               "traceloop.span.kind": "task"});
        assert_eq!(norm(retriever, "").step_kind, "retrieval");
    }

    #[test]
    fn name_prefixes_then_suffixes() {
        let cases = [
            ("execute_tool f", "tool"),
            ("invoke_agent", "agent"),
            ("create_agent a", "agent"),
            ("handoff to b", "handoff"),
            ("chat gpt", "llm"),
            ("embeddings m", "embedding"),
            ("retrieval r", "retrieval"),
            ("apply_guardrail g", "guardrail"),
            ("x.tool", "tool"),
            ("x.agent", "agent"),
            ("x.handoff", "handoff"),
            ("x.chat", "llm"),
            ("chat", "other"),
            ("", "other"),
        ];
        for (name, kind) in cases {
            assert_eq!(norm(json!({}), name).step_kind, kind, "{name}");
        }
        assert_eq!(norm(json!({}), "chat x.tool").step_kind, "llm");
    }

    // Names, model, tokens, error.

    #[test]
    fn tool_name_from_attributes_entity_or_span_name() {
        assert_eq!(
            tool(json!({"tool.name": 5})).tool_name.as_deref(),
            Some("5")
        );
        let entity = json!({"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup"});
        let out = normalized(&attrs(entity), "lookup.tool", &[], 0);
        assert_eq!(out.tool_name.as_deref(), Some("lookup"));
        for (name, expected) in [
            ("execute_tool search", Some("search")),
            ("execute_tool ", Some("")),
            ("tools/call fetch", Some("fetch")),
            ("MCP send tools/call fetch", Some("fetch")),
            ("get.tool", Some("get")),
            ("", None),
        ] {
            let out = normalized(
                &attrs(json!({"mcp.method.name": "tools/call"})),
                name,
                &[],
                0,
            );
            assert_eq!(out.tool_name.as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn tool_columns_only_on_tool_spans() {
        let out = norm(
            json!({"gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": "{}"}),
            "chat x",
        );
        assert_eq!(
            (out.tool_name, out.tool_arguments, out.kept_as_text),
            (None, None, None)
        );
    }

    #[test]
    fn agent_name_rules() {
        assert_eq!(
            norm(json!({"agent.name": 3}), "chat x")
                .agent_name
                .as_deref(),
            Some("3")
        );
        let entity = json!({"traceloop.span.kind": "agent", "traceloop.entity.name": "planner"});
        assert_eq!(norm(entity, "").agent_name.as_deref(), Some("planner"));
        assert_eq!(
            norm(json!({}), "invoke_agent triage").agent_name.as_deref(),
            Some("triage")
        );
        assert_eq!(norm(json!({}), "invoke_agent").agent_name, None);
        assert_eq!(
            norm(json!({}), "create_agent ").agent_name.as_deref(),
            Some("")
        );
        assert_eq!(
            norm(json!({}), "bot.agent").agent_name.as_deref(),
            Some("bot")
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": "AGENT"}), "Planner")
                .agent_name
                .as_deref(),
            Some("Planner")
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": "AGENT"}), "").agent_name,
            None
        );
        assert_eq!(
            norm(json!({"openinference.span.kind": "LLM"}), "Planner").agent_name,
            None
        );
    }

    #[test]
    fn model_skips_unknown_and_non_string_values() {
        let out = norm(
            json!({"gen_ai.response.model": "unknown", "gen_ai.request.model": 4, "llm.model_name": "m"}),
            "",
        );
        assert_eq!(out.model.as_deref(), Some("m"));
        assert_eq!(
            norm(json!({"embedding.model_name": "_OTHER"}), "").model,
            None
        );
    }

    #[test]
    fn model_from_chat_span_name_only_for_llm_spans() {
        assert_eq!(
            norm(json!({}), "chat gpt-4o").model.as_deref(),
            Some("gpt-4o")
        );
        assert_eq!(norm(json!({}), "chat unknown").model, None);
        assert_eq!(norm(json!({}), "chat ").model, None);
        assert_eq!(
            norm(json!({"openinference.span.kind": "TOOL"}), "chat gpt-4o").model,
            None
        );
    }

    fn input_tokens(value: Value) -> Option<i64> {
        norm(json!({"gen_ai.usage.input_tokens": value}), "").input_tokens
    }

    #[test]
    fn tokens_from_numbers() {
        assert_eq!(input_tokens(json!(0)), Some(0));
        assert_eq!(input_tokens(json!(i64::MAX)), Some(i64::MAX));
        assert_eq!(input_tokens(json!(-1)), None);
        assert_eq!(input_tokens(json!(u64::MAX)), None);
        assert_eq!(input_tokens(json!(5.9)), Some(5));
        assert_eq!(input_tokens(json!(-0.5)), Some(0));
        assert_eq!(input_tokens(json!(-1.5)), None);
        assert_eq!(input_tokens(json!(1e30)), None);
        assert_eq!(input_tokens(json!(2f64.powi(63))), None);
        assert_eq!(
            input_tokens(json!(9223372036854774784.0)),
            Some(9223372036854774784)
        );
    }

    #[test]
    fn tokens_refuse_bools_and_containers() {
        assert_eq!(input_tokens(json!(true)), None);
        assert_eq!(input_tokens(json!([1])), None);
        assert_eq!(input_tokens(json!({"n": 1})), None);
    }

    #[test]
    fn tokens_from_text_follow_python_int() {
        let cases = [
            (" 12 ", Some(12)),
            ("+7", Some(7)),
            ("-0", Some(0)),
            ("-5", None),
            ("010", Some(10)),
            ("1_000", Some(1000)),
            ("１２", Some(12)),
            ("٣", Some(3)),
            ("\u{3000}7\u{2029}", Some(7)),
            ("\u{85}7", Some(7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("9223372036854775808", None),
            ("1.5", None),
            ("_1", None),
            ("1_", None),
            ("1__0", None),
            ("+_1", None),
            ("- 1", None),
            ("+-1", None),
            ("0x10", None),
            ("1 2", None),
            ("\u{1c}5", None),
            ("5\u{200b}", None),
            ("12\0", None),
            ("+", None),
            (" ", None),
        ];
        for (text, expected) in cases {
            assert_eq!(input_tokens(json!(text)), expected, "{text:?}");
        }
    }

    #[test]
    fn tokens_from_text_stop_at_4300_digits() {
        assert_eq!(py_int(&format!("{}1", "0".repeat(4299))), Some(1));
        assert_eq!(py_int(&format!("{}1", "0".repeat(4300))), None);
        assert_eq!(py_int(&format!("{}1", "0_".repeat(4299))), Some(1));
    }

    #[test]
    fn tokens_take_the_first_key_present() {
        let out = norm(
            json!({"llm.token_count.completion": 9, "gen_ai.usage.output_tokens": "", "gen_ai.usage.completion_tokens": 4}),
            "",
        );
        assert_eq!(out.output_tokens, Some(4));
    }

    #[test]
    fn conversation_and_user_are_the_first_present_key_as_text() {
        let out = norm(
            json!({"mcp.session.id": "m", "session.id": 0, "gen_ai.user": "", "enduser.id": false}),
            "",
        );
        assert_eq!(out.conversation_id.as_deref(), Some("0"));
        assert_eq!(out.user_id.as_deref(), Some("False"));
    }

    fn error_of(value: Value, events: &[(&str, Value)], status: i32) -> Option<String> {
        let event_attrs: Vec<Attrs> = events.iter().map(|(_, a)| attrs(a.clone())).collect();
        let views: Vec<EventView> = events
            .iter()
            .zip(&event_attrs)
            .map(|((name, _), attributes)| EventView { name, attributes })
            .collect();
        normalized(&attrs(value), "", &views, status).error_type
    }

    #[test]
    fn error_type_attribute_wins_on_any_status() {
        assert_eq!(
            error_of(json!({"error.type": "Timeout"}), &[], 0).as_deref(),
            Some("Timeout")
        );
        assert_eq!(
            error_of(json!({"error.type": 500}), &[], 1).as_deref(),
            Some("500")
        );
    }

    #[test]
    fn error_type_from_the_first_exception_event_only_on_error_status() {
        let events = [
            ("other", json!({"exception.type": "Nope"})),
            ("exception", json!({"exception.type": ""})),
            ("exception", json!({})),
            ("exception", json!({"exception.type": "KeyError"})),
            ("exception", json!({"exception.type": "Later"})),
        ];
        assert_eq!(
            error_of(json!({"error.type": 0}), &events, 2).as_deref(),
            Some("KeyError")
        );
        assert_eq!(error_of(json!({}), &events, 1), None);
        assert_eq!(
            error_of(
                json!({}),
                &[("Exception", json!({"exception.type": "E"}))],
                2
            ),
            None
        );
    }

    // JSON reading.

    #[test]
    fn only_strings_starting_with_a_bracket_or_quote_are_parsed() {
        for text in [" [1]", "null", "12", "true", "x{}"] {
            assert!(
                matches!(json_or_text(&json!(text)), (Cow::Borrowed(_), false)),
                "{text}"
            );
        }
        assert_eq!(parse_json(&json!("[1]")).into_owned(), json!([1]));
        assert_eq!(parse_json(&json!("\"s\"")).into_owned(), json!("s"));
        assert!(matches!(json_or_text(&json!(5)), (Cow::Borrowed(_), false)));
    }

    #[test]
    fn json_nested_128_levels_parses_and_129_is_kept_as_text_and_flagged() {
        let parses = nested("[", "", "]", 128);
        assert!(matches!(read(&parses), Read::Value(_)));
        assert!(!flagged(&parses));
        assert!(flagged(&nested("[", "", "]", 129)));
        let objects = nested("{\"a\":", "1", "}", 128);
        assert!(matches!(read(&objects), Read::Value(_)));
        assert!(flagged(&nested("{\"a\":", "1", "}", 129)));
        assert!(flagged(&nested("{\"a\":", "{}", "}", 128)));
        assert!(!flagged(&nested("{\"a\":", "[1]", "}", 127)));
    }

    #[test]
    fn many_brackets_in_strings_or_siblings_are_not_depth() {
        let wide = format!("[{}]", vec!["{}"; 500].join(","));
        assert!(matches!(read(&wide), Read::Value(_)));
        let quoted = format!("[\"{}\"]", "[".repeat(500));
        assert!(!flagged(&quoted));
    }

    #[test]
    fn deep_json_up_to_orjson_limit_is_flagged_and_beyond_it_too() {
        assert!(flagged(&nested("[", "", "]", 1024)));
        assert!(flagged(&nested("[", "", "]", 1025)));
    }

    #[test]
    fn deep_text_that_is_not_json_is_not_flagged_unless_it_reaches_orjson_limit() {
        assert!(!flagged(&format!("{}x", "[".repeat(200))));
        assert!(!flagged(&format!("{}{}", "[".repeat(300), "]".repeat(299))));
        // orjson reports its depth limit before it sees that the text stops short.
        assert!(flagged(&format!(
            "{}{}",
            "[".repeat(1100),
            "]".repeat(1099)
        )));
        assert!(flagged(&format!("{}[x", "[".repeat(1024))));
        assert!(!flagged(&format!("{}x", "[".repeat(1024))));
    }

    #[test]
    fn very_deep_text_does_not_exhaust_the_stack() {
        assert_eq!(read(&"[".repeat(1_000_000)), Read::TooDeep);
        assert_eq!(read(&nested("{\"k\":", "0", "}", 1000)), Read::TooDeep);
    }

    #[test]
    fn text_that_is_not_strict_json_is_kept_as_text() {
        let invalid = [
            "[1,]",
            "{\"a\":1,}",
            "[NaN]",
            "[Infinity]",
            "[01]",
            "[1.]",
            "[.5]",
            "[+1]",
            "[1e400]",
            "[-1e400]",
            "[1e]",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800x\"",
            "\"a\tb\"",
            "\"\\x\"",
            "[1] x",
            "[1]\0",
            "[1\u{b}]",
            "[tru]",
            "{\"a\"}",
            "{,}",
            "[1 2]",
            "{1:2}",
            "[",
            "\"abc",
            "['a']",
            "[\"\\u12\"]",
        ];
        for text in invalid {
            assert!(
                matches!(json_or_text(&json!(text)), (Cow::Borrowed(_), false)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn json_numbers_read_as_orjson_does() {
        let Read::Value(v) = read("[-0, -0.0, 1E2, 18446744073709551615, 18446744073709551616, -9223372036854775808, -9223372036854775809, 1e-400]") else {
            panic!("valid JSON");
        };
        assert_eq!(as_json_text(&v), "[0,-0.0,100.0,18446744073709551615,1.8446744073709552e+19,-9223372036854775808,-9.223372036854776e+18,0.0]");
        assert!(v[0].is_i64());
        let Read::Value(v) =
            read("[2.2250738585072014e-308, 0.30000000000000004, 123456789012345678901234567890]")
        else {
            panic!("valid JSON");
        };
        assert_eq!(
            as_json_text(&v),
            "[2.2250738585072014e-308,0.30000000000000004,1.2345678901234568e+29]"
        );
    }

    #[test]
    fn json_strings_decode_escapes_and_surrogate_pairs() {
        let Read::Value(v) = read(r#""\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\u0000 \u2028 é""#) else {
            panic!("valid JSON");
        };
        assert_eq!(
            v,
            json!("\"\\/\u{8}\u{c}\n\r\t\u{e9}\u{1f600}\0 \u{2028} é")
        );
    }

    #[test]
    fn json_duplicate_keys_keep_the_first_position_and_the_last_value() {
        let Read::Value(v) = read(r#"{"a": 1, "b": 2, "a": 3}"#) else {
            panic!("valid JSON");
        };
        assert_eq!(as_json_text(&v), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn json_whitespace_is_the_four_json_characters() {
        assert!(matches!(read(" \t\n\r[ 1 ,\t2 ]\r\n "), Read::Value(_)));
        assert_eq!(read("[1,\u{a0}2]"), Read::Invalid);
    }

    #[test]
    fn json_text_escapes_like_orjson() {
        let text = as_json_text(&json!("q\"b\\s\u{8}\u{c}\n\r\t\u{1}\u{1f}/\u{7f}\u{2028}é"));
        assert_eq!(
            text,
            "\"q\\\"b\\\\s\\b\\f\\n\\r\\t\\u0001\\u001f/\u{7f}\u{2028}é\""
        );
        assert_eq!(
            as_json_text(&json!({"k": [1, -2, true, null, {}]})),
            r#"{"k":[1,-2,true,null,{}]}"#
        );
    }

    // Tool fields.

    fn args(value: Value) -> Option<String> {
        tool(json!({"gen_ai.tool.call.arguments": value})).tool_arguments
    }

    fn result(value: Value) -> Option<String> {
        tool(json!({"gen_ai.tool.call.result": value})).tool_result
    }

    #[test]
    fn json_arguments_are_kept_verbatim() {
        assert_eq!(
            args(json!("{ \"q\" : 1 }")).as_deref(),
            Some("{ \"q\" : 1 }")
        );
        assert_eq!(args(json!("\"quoted\"")).as_deref(), Some("\"quoted\""));
        assert_eq!(args(json!("[1.50]")).as_deref(), Some("[1.50]"));
    }

    #[test]
    fn arguments_that_are_not_json_become_a_json_string() {
        assert_eq!(args(json!("hello")).as_deref(), Some("\"hello\""));
        assert_eq!(args(json!("{bad")).as_deref(), Some("\"{bad\""));
        let deep = nested("[", "", "]", 129);
        let out = tool(json!({"gen_ai.tool.call.arguments": deep}));
        assert_eq!(out.tool_arguments, Some(as_json_text(&json!(deep))));
        assert_eq!(
            out.kept_as_text,
            Some(vec!["gen_ai.tool.call.arguments".to_owned()])
        );
    }

    #[test]
    fn arguments_that_are_not_strings_are_encoded() {
        assert_eq!(args(json!(5)).as_deref(), Some("5"));
        assert_eq!(args(json!(false)).as_deref(), Some("false"));
        assert_eq!(args(json!(1e16)).as_deref(), Some("1e+16"));
        assert_eq!(
            args(json!({"q": [1, "a"]})).as_deref(),
            Some(r#"{"q":[1,"a"]}"#)
        );
    }

    #[test]
    fn arguments_come_from_the_first_present_key() {
        let out = tool(
            json!({"traceloop.entity.input": "[3]", "gen_ai.tool.call.arguments": "", "input.value": 0}),
        );
        assert_eq!(out.tool_arguments.as_deref(), Some("0"));
        assert_eq!(tool(json!({})).tool_arguments, None);
    }

    #[test]
    fn callback_envelopes_around_arguments_are_unwrapped() {
        let cases = [
            (json!({"inputs": {"q": 1}, "input_str": "x"}), r#"{"q":1}"#),
            (json!({"inputs": null, "tags": []}), "null"),
            (json!({"input_str": "{\"a\": 1}"}), r#"{"a":1}"#),
            (json!({"input_str": "plain"}), "\"plain\""),
            (json!({"input_str": 5}), "5"),
            (json!({"args": [], "kwargs": {"a": 1}}), r#"{"a":1}"#),
            (
                json!({"args": [1], "kwargs": {"b": 2, "args": 3}}),
                r#"{"args":3,"b":2}"#,
            ),
            (json!({"args": 0, "kwargs": "x"}), "\"x\""),
            (json!({"kwargs": null}), "null"),
        ];
        for (envelope, expected) in cases {
            let text = as_json_text(&envelope);
            assert_eq!(args(json!(text)).as_deref(), Some(expected), "{text}");
            assert_eq!(args(envelope).as_deref(), Some(expected));
        }
    }

    #[test]
    fn envelopes_with_other_keys_are_not_unwrapped() {
        let text = r#"{"args": [], "kwargs": {"a": 1}, "x": 1}"#;
        assert_eq!(args(json!(text)).as_deref(), Some(text));
        assert_eq!(
            args(json!({"args": [1]})).as_deref(),
            Some(r#"{"args":[1]}"#)
        );
    }

    #[test]
    fn kwargs_that_are_not_a_mapping_stay_as_they_came() {
        let text = r#"{"args": [1], "kwargs": 5}"#;
        let map = attrs(json!({"gen_ai.operation.name": "execute_tool", "input.value": text}));
        assert_eq!(
            normalized(&map, "t", &[], 0).tool_arguments.as_deref(),
            Some(text)
        );
        // without args the kwargs are the arguments, whatever they are
        let without_args = r#"{"args": [], "kwargs": 5}"#;
        let map =
            attrs(json!({"gen_ai.operation.name": "execute_tool", "input.value": without_args}));
        assert_eq!(
            normalized(&map, "t", &[], 0).tool_arguments.as_deref(),
            Some("5")
        );
    }

    #[test]
    fn results_as_text_json_verbatim_and_decoded_strings() {
        assert_eq!(result(json!("plain")).as_deref(), Some("plain"));
        assert_eq!(result(json!("{bad")).as_deref(), Some("{bad"));
        assert_eq!(
            result(json!("{ \"ok\": true }")).as_deref(),
            Some("{ \"ok\": true }")
        );
        assert_eq!(result(json!("\"decoded\"")).as_deref(), Some("decoded"));
        assert_eq!(result(json!(0)).as_deref(), Some("0"));
        assert_eq!(result(json!([1, 2])).as_deref(), Some("[1,2]"));
    }

    #[test]
    fn serialized_tool_messages_give_their_content() {
        let cases = [
            (json!({"output": {"q": 1}}), Some(r#"{"q":1}"#)),
            (json!({"output": "text", "kwargs": {}}), Some("text")),
            (json!({"output": null}), None),
            (json!({"output": 5}), Some("5")),
            (
                json!({"output": 1, "extra": 2}),
                Some(r#"{"output":1,"extra":2}"#),
            ),
            (
                json!({"output": {"lc": 1, "type": "constructor", "kwargs": {"content": "c"}}}),
                Some("c"),
            ),
            (
                json!({"lc": 1, "type": "tool", "kwargs": {"content": {"k": [1]}}}),
                Some(r#"{"k":[1]}"#),
            ),
            (json!({"type": "tool", "data": {"content": "d"}}), Some("d")),
            (json!({"type": "tool", "data": {}}), None),
            (
                json!({"lc": 0, "type": "tool", "kwargs": {"content": "k"}}),
                Some(r#"{"lc":0,"type":"tool","kwargs":{"content":"k"}}"#),
            ),
            (
                json!({"type": "other", "data": {"content": "d"}}),
                Some(r#"{"type":"other","data":{"content":"d"}}"#),
            ),
        ];
        for (message, expected) in cases {
            let text = as_json_text(&message);
            assert_eq!(result(json!(text)).as_deref(), expected, "{text}");
        }
    }

    #[test]
    fn call_id_from_attributes_then_envelopes() {
        let out = tool(
            json!({"tool.id": 0, "gen_ai.tool.call.arguments": r#"{"kwargs": {"tool_call_id": "x"}}"#}),
        );
        assert_eq!(out.tool_call_id.as_deref(), Some("0"));
        let out = tool(json!({"input.value": r#"{"kwargs": {"tool_call_id": "a1"}}"#}));
        assert_eq!(out.tool_call_id.as_deref(), Some("a1"));
        let nested_id = r#"{"kwargs": {"tool_call_id": "", "output": {"data": {"tool_call_id": 7}}}, "data": {"tool_call_id": "later"}}"#;
        assert_eq!(
            tool(json!({"output.value": nested_id}))
                .tool_call_id
                .as_deref(),
            Some("7")
        );
        let both = json!({"input.value": "{}", "output.value": {"data": {"tool_call_id": "r1"}}});
        assert_eq!(tool(both).tool_call_id.as_deref(), Some("r1"));
        assert_eq!(tool(json!({})).tool_call_id, None);
    }

    #[test]
    fn kept_as_text_lists_every_deep_tool_key_in_key_order() {
        let deep = nested("{\"a\":", "1", "}", 130);
        let out = tool(
            json!({"output.value": deep, "input.value": deep, "gen_ai.tool.call.arguments": "{}"}),
        );
        assert_eq!(
            out.kept_as_text,
            Some(vec!["input.value".to_owned(), "output.value".to_owned()])
        );
        assert_eq!(out.tool_arguments.as_deref(), Some("{}"));
        assert_eq!(out.tool_result.as_deref(), Some(deep.as_str()));
    }

    #[test]
    fn envelope_keys_written_with_escapes_are_still_envelope_keys() {
        let out = tool(json!({"output.value": r#"{"\u006bwargs": {"tool_call_id": "e1"}}"#}));
        assert_eq!(out.tool_call_id.as_deref(), Some("e1"));
        assert_eq!(
            out.tool_result.as_deref(),
            Some(r#"{"\u006bwargs": {"tool_call_id": "e1"}}"#)
        );
    }

    #[test]
    fn json_without_envelope_keys_is_kept_verbatim() {
        let args = r#"{"metadata": {"a": [1, 2]}, "x": "\u00e9"}"#;
        let result = r#"[{"kwargs": {"tool_call_id": 1}}]"#;
        let out = tool(json!({"input.value": args, "output.value": result}));
        assert_eq!(out.tool_arguments.as_deref(), Some(args));
        assert_eq!(out.tool_result.as_deref(), Some(result));
        assert_eq!(out.tool_call_id, None);
    }

    #[test]
    fn envelope_values_no_rule_reads_do_not_change_the_outcome() {
        let text = r#"{"inputs": {"q": 1}, "tags": ["t"], "metadata": {"big": [1, {"k": "v"}]}}"#;
        assert_eq!(args(json!(text)).as_deref(), Some(r#"{"q":1}"#));
        let duplicate = r#"{"kwargs": 1, "args": [1], "kwargs": {"a": 2}}"#;
        assert_eq!(
            args(json!(duplicate)).as_deref(),
            Some(r#"{"args":[1],"a":2}"#)
        );
        let message = r#"{"output": {"type": "tool", "data": {"content": [1.0, 1e16]}}, "kwargs": {"x": {"deep": 1}}}"#;
        assert_eq!(result(json!(message)).as_deref(), Some("[1.0,1e+16]"));
    }

    #[test]
    fn the_same_text_under_two_keys_gives_the_same_outcome() {
        let deep = nested("[", "", "]", 129);
        let out = tool(json!({"gen_ai.tool.call.arguments": deep, "traceloop.entity.input": deep}));
        let both = vec![
            "gen_ai.tool.call.arguments".to_owned(),
            "traceloop.entity.input".to_owned(),
        ];
        assert_eq!(out.kept_as_text, Some(both));
    }

    // The single pass over the attributes.

    #[test]
    fn every_key_table_entry_has_its_slot() {
        type Slots = fn(&Probe<'_>) -> Vec<bool>;
        let tables: [(&[&str], Slots); 9] = [
            (&MODEL_KEYS, |p| {
                p.model.iter().map(Option::is_some).collect()
            }),
            (&INPUT_TOKEN_KEYS, |p| {
                p.input_tokens.iter().map(Option::is_some).collect()
            }),
            (&OUTPUT_TOKEN_KEYS, |p| {
                p.output_tokens.iter().map(Option::is_some).collect()
            }),
            (&CONVERSATION_KEYS, |p| {
                p.conversation.iter().map(Option::is_some).collect()
            }),
            (&USER_KEYS, |p| p.user.iter().map(Option::is_some).collect()),
            (&TOOL_NAME_KEYS, |p| {
                p.tool_name.iter().map(Option::is_some).collect()
            }),
            (&AGENT_NAME_KEYS, |p| {
                p.agent_name.iter().map(Option::is_some).collect()
            }),
            (&TOOL_CALL_ID_KEYS, |p| {
                p.tool_call_id.iter().map(Option::is_some).collect()
            }),
            (&TOOL_JSON_KEYS, |p| {
                p.tool_json.iter().map(Option::is_some).collect()
            }),
        ];
        for (keys, slots) in tables {
            for (i, key) in keys.iter().enumerate() {
                let map = attrs(json!({ *key: 1 }));
                let filled = slots(&Probe::new(&map));
                let expected: Vec<bool> = (0..keys.len()).map(|j| j == i).collect();
                assert_eq!(filled, expected, "{key}");
            }
        }
    }

    #[test]
    fn a_span_with_none_of_the_keys_is_other_with_nothing_set() {
        let out = norm(json!({"http.method": "GET", "db.system": "x"}), "GET /");
        assert_eq!(
            out,
            Normalized {
                step_kind: "other",
                ..Normalized::default()
            }
        );
    }
}
