//! `GuardService/Check` answered in the OTLP/gRPC listener's own threads, without the GIL,
//! for a run the guard keeps natively: the call's bytes are read, its token checked, the run
//! weighed and the answer written here, so a call's latency no longer waits for Python's event
//! loop (shared with ingest, and with every thread that holds the GIL). Only recording the
//! guard's step and its metrics are left to the loop, after the answer has gone.
//!
//! Everything this side cannot answer exactly as Python would is handed to Python as before:
//! a request it does not read as Python's model does (or one Python refuses), a token it does
//! not find, a run the assembler does not hold whole, packs not read natively or asking session
//! rules, an MCP call. A run not kept yet, and a target's decision not remembered since the
//! decisions last changed, are asked of Python with the GIL, in the listener's thread.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use pyo3::prelude::*;
use serde_json::Value;

use crate::guard_answer::{Answered, Settings};
use crate::guard_judge::{lock, GuardCore, Judgement, OwnedRow, ANSWERED_MOST};
use crate::rules_pack::Pack;

/// Decisions remembered per target at most between two changes of the decisions.
const DECISIONS_REMEMBERED: usize = 10_000;
/// Nesting of a call's arguments past which the call is left to Python (orjson's own limit is
/// 1,024 levels; no tool's arguments come near this).
const DEEPEST_ARGUMENTS: usize = 64;

/// One pack in force: its native form, its `guard:` settings, whether it asks session rules.
pub(crate) struct InForce {
    pub pack: Arc<Pack>,
    pub settings: Settings,
    pub asks_sessions: bool,
}

/// A target: service, agent, version.
pub(crate) type Target = (String, String, String);

/// What the guard's answers depend on besides the run, pushed by Python as it changes.
#[derive(Default)]
pub(crate) struct Policy {
    /// The packs in force (None: not told since they changed, or a guard rule of one is not
    /// native), and the generation of the packs they were read under.
    pub packs: Option<Arc<Vec<InForce>>>,
    pub packs_gen: u64,
    /// The targets' decisions (service, agent, version) -> (decision, reasons that fire), as
    /// of the decisions' generation `decisions_gen`.
    pub decisions: std::collections::HashMap<Target, (String, Vec<String>)>,
    pub decisions_gen: u64,
    /// The listener answers calls (set by `listen`), with these tokens (none: no auth).
    pub listening: bool,
    pub tokens: Vec<Vec<u8>>,
    /// Whether conversations are held, so that a pack asking session rules matters.
    pub sessions: bool,
}

impl Policy {
    /// Whether a pack in force that may select the service's runs asks session rules (those
    /// are weighed in Python, with the conversation).
    pub fn asks_sessions(&self, packs: &[InForce], service: &str) -> bool {
        self.sessions
            && packs.iter().any(|p| {
                p.asks_sessions
                    && p.pack
                        .service
                        .as_ref()
                        .is_none_or(|g| g.matches(Some(service)))
            })
    }

    pub fn know_decision(&mut self, gen: u64, target: Target, d: (String, Vec<String>)) {
        if gen != self.decisions_gen {
            return; // read from decisions changed since: not kept
        }
        if self.decisions.len() >= DECISIONS_REMEMBERED {
            self.decisions.clear();
        }
        self.decisions.insert(target, d);
    }
}

/// A guard step answered here, for Python to record and count.
pub(crate) struct Recorded {
    pub trace_id: String,
    pub service: String,
    pub version: Option<String>,
    pub tool: String,
    pub tool_call_id: Option<String>,
    pub judgement: Judgement,
    pub span_id: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub seconds: f64,
    /// grpc or http: how the call came.
    pub protocol: &'static str,
}

#[derive(Clone, PartialEq, Message)]
struct ProposedCall {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    arguments_json: String,
    #[prost(string, tag = "3")]
    kind: String,
    #[prost(string, tag = "4")]
    tool_call_id: String,
    #[prost(string, tag = "5")]
    mcp_server: String,
}

#[derive(Clone, PartialEq, Message)]
struct CheckRequest {
    #[prost(string, tag = "1")]
    trace_id: String,
    #[prost(string, tag = "2")]
    parent_span_id: String,
    #[prost(string, tag = "3")]
    service: String,
    #[prost(string, tag = "4")]
    agent: String,
    #[prost(string, tag = "5")]
    version: String,
    #[prost(message, optional, tag = "6")]
    tool: Option<ProposedCall>,
    #[prost(string, tag = "7")]
    conversation_id: String,
}

#[derive(Clone, PartialEq, Message)]
struct CheckResponse {
    #[prost(string, tag = "1")]
    answer: String,
    #[prost(string, repeated, tag = "2")]
    reasons: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    evidence: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    messages: Vec<String>,
    #[prost(string, tag = "5")]
    span_id: String,
    #[prost(string, tag = "6")]
    decision: String,
}

/// A call as collector/guard/call.py `GuardRequest` validates it (None: anything it would
/// refuse or read otherwise, which Python then answers), with its arguments as `orjson`
/// writes them.
struct Proposal {
    trace_id: String,
    parent_span_id: Option<String>,
    service: String,
    agent: Option<String>,
    version: Option<String>,
    tool: String,
    tool_call_id: Option<String>,
    arguments: String,
}

/// At most `most` code points (pydantic's `max_length` on text).
fn short(text: &str, most: usize) -> bool {
    text.chars().count() <= most
}

/// `None` for "" (the message's unset field), else the text if at most 256 code points.
fn optional(text: String) -> Result<Option<String>, ()> {
    match text.is_empty() {
        true => Ok(None),
        false if short(&text, 256) => Ok(Some(text)),
        false => Err(()),
    }
}

/// Hex digits of exactly `len`, lower-cased, not all zero (call.py's `_trace`/`_span`).
fn hex_id(text: &str, len: usize) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let hex = lower.len() == len && lower.bytes().all(|b| b.is_ascii_hexdigit());
    (hex && lower.bytes().any(|b| b != b'0')).then_some(lower)
}

/// Arguments whose compact JSON is the same text from serde_json as from orjson: no floats (or
/// integers past 64 bits, read as floats), no control characters but those both escape alike,
/// not deeper than `DEEPEST_ARGUMENTS`.
fn plain(value: &Value, depth: usize) -> bool {
    let text_ok = |s: &str| {
        !s.chars()
            .any(|c| c < ' ' && !"\n\r\t\u{8}\u{c}".contains(c))
    };
    match value {
        _ if depth > DEEPEST_ARGUMENTS => false,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        Value::String(s) => text_ok(s),
        Value::Array(items) => items.iter().all(|v| plain(v, depth + 1)),
        Value::Object(fields) => fields
            .iter()
            .all(|(k, v)| text_ok(k) && plain(v, depth + 1)),
        _ => true,
    }
}

impl Proposal {
    /// A `CheckRequest`'s bytes (gRPC), read as collector/guard/wire.py `request_of` reads them.
    fn of_protobuf(body: &[u8]) -> Option<Self> {
        let m = CheckRequest::decode(body).ok()?;
        let tool = m.tool?;
        let kind_ok = tool.kind.is_empty() || tool.kind == "tool";
        if !kind_ok || optional(tool.mcp_server).ok()?.is_some() {
            return None; // an MCP call (its step is judged in Python) or one Python refuses
        }
        let parent_span_id = match m.parent_span_id.as_str() {
            "" => None,
            given => Some(hex_id(given, 16)?),
        };
        optional(m.conversation_id).ok()?;
        let arguments = match tool.arguments_json.as_str() {
            "" => "{}".to_owned(),
            given => arguments(&serde_json::from_str(given).ok()?)?,
        };
        Proposal::named(Proposal {
            trace_id: hex_id(&m.trace_id, 32)?,
            parent_span_id,
            service: m.service,
            agent: optional(m.agent).ok()?,
            version: optional(m.version).ok()?,
            tool: tool.name,
            tool_call_id: optional(tool.tool_call_id).ok()?,
            arguments,
        })
    }

    /// A `POST /v1/guard` body (JSON), read as `GuardRequest.model_validate_json` reads it. Only
    /// the plain form is read here: known keys, text or null where the model takes text, no
    /// empty optional text (the model keeps "" where the gRPC message means unset).
    fn of_json(body: &[u8]) -> Option<Self> {
        const CALL: [&str; 7] = [
            "trace_id",
            "parent_span_id",
            "service",
            "agent",
            "version",
            "conversation_id",
            "tool",
        ];
        const TOOL: [&str; 5] = ["name", "arguments", "kind", "tool_call_id", "mcp_server"];
        let Value::Object(m) = serde_json::from_slice(body).ok()? else {
            return None;
        };
        let Some(Value::Object(tool)) = m.get("tool") else {
            return None;
        };
        let known = |o: &serde_json::Map<String, Value>, keys: &[&str]| {
            o.keys().all(|k| keys.contains(&k.as_str()))
        };
        if !known(&m, &CALL) || !known(tool, &TOOL) {
            return None;
        }
        let kind_ok = tool.get("kind").is_none_or(|k| k == "tool");
        if !kind_ok || json_text(tool, "mcp_server").ok()?.is_some() {
            return None; // an MCP call (its step is judged in Python) or one Python refuses
        }
        json_text(&m, "conversation_id").ok()?;
        let parent_span_id = match json_text(&m, "parent_span_id").ok()? {
            None => None,
            Some(given) => Some(hex_id(&given, 16)?),
        };
        let arguments = match tool.get("arguments") {
            None => "{}".to_owned(),
            Some(given) => arguments(given)?,
        };
        let required = |o: &serde_json::Map<String, Value>, key: &str| match o.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        Proposal::named(Proposal {
            trace_id: hex_id(&required(&m, "trace_id")?, 32)?,
            parent_span_id,
            service: required(&m, "service")?,
            agent: json_text(&m, "agent").ok()?,
            version: json_text(&m, "version").ok()?,
            tool: required(tool, "name")?,
            tool_call_id: json_text(tool, "tool_call_id").ok()?,
            arguments,
        })
    }

    /// The proposal when its service and tool are named as the model requires.
    fn named(self) -> Option<Self> {
        let named = |s: &str| !s.is_empty() && short(s, 256);
        (named(&self.service) && named(&self.tool)).then_some(self)
    }
}

/// A guard call's body as the native listeners read it (`protobuf`: a gRPC `CheckRequest`,
/// else a `POST /v1/guard` JSON body): (trace id, parent span, service, agent, version, tool,
/// tool call id, arguments as compact JSON), or None when it is left to Python. What the
/// differential test holds against `GuardRequest` on generated bodies.
#[pyfunction]
pub fn guard_call_read(body: &[u8], protobuf: bool) -> Option<ReadCall> {
    let read = match protobuf {
        true => Proposal::of_protobuf(body),
        false => Proposal::of_json(body),
    }?;
    Some((
        read.trace_id,
        read.parent_span_id,
        read.service,
        read.agent,
        read.version,
        read.tool,
        read.tool_call_id,
        read.arguments,
    ))
}

type Text = Option<String>;
type ReadCall = (String, Text, String, Text, Text, String, Text, String);

/// An optional text field of a JSON call: absent or null is None; "" or more than 256 code
/// points, or anything but text, is Err (left to Python).
fn json_text(o: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, ()> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => optional(s.clone()).and_then(|t| t.ok_or(())).map(Some),
        Some(_) => Err(()),
    }
}

/// A call's arguments as orjson writes them, when they are an object both write alike.
fn arguments(value: &Value) -> Option<String> {
    if !value.is_object() || !plain(value, 0) {
        return None;
    }
    serde_json::to_string(value).ok()
}

/// `BearerAuth.check` when it passes: a `Bearer` token equal to one configured (each compared
/// in full, so timing does not tell which nearly matched); no tokens: every call passes. A
/// header it refuses is left to Python, which says why.
fn authorized(tokens: &[Vec<u8>], header: Option<&str>) -> bool {
    if tokens.is_empty() {
        return true;
    }
    let Some((scheme, token)) = header.and_then(|h| h.split_once(' ')) else {
        return false;
    };
    let candidate = token.trim().as_bytes();
    if !scheme.eq_ignore_ascii_case("bearer") || candidate.is_empty() {
        return false;
    }
    tokens.iter().fold(false, |matched, known| {
        let differs = known.len() != candidate.len()
            || known
                .iter()
                .zip(candidate)
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                != 0;
        matched | !differs
    })
}

static SPANS: AtomicU64 = AtomicU64::new(0);

/// A random span id, never all zeros (the guard's step): a keyed hash of a counter.
fn new_span_id(seed: &RandomState) -> String {
    let n = SPANS.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}", seed.hash_one(n).max(1))
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl GuardCore {
    fn policy(&self) -> MutexGuard<'_, Policy> {
        lock(&self.policy)
    }

    /// The answer to a `GuardService/Check` call's bytes (the CheckResponse), or None: Python
    /// answers it. `arrived`: when the call arrived, for the guard's latency.
    pub(crate) fn answer_call(
        &self,
        body: &[u8],
        authorization: Option<&str>,
        arrived: Instant,
    ) -> Option<Vec<u8>> {
        let (a, span_id) =
            self.judge(Proposal::of_protobuf, body, authorization, arrived, "grpc")?;
        let response = CheckResponse {
            answer: a.answer,
            reasons: a.reasons,
            evidence: a.evidence,
            messages: a.messages,
            span_id,
            decision: a.decision,
        };
        Some(response.encode_to_vec())
    }

    /// The answer to a `POST /v1/guard` body, as `GuardAnswer.as_json` written by orjson, or
    /// None: Python answers it.
    pub(crate) fn answer_json(
        &self,
        body: &[u8],
        authorization: Option<&str>,
        arrived: Instant,
    ) -> Option<Vec<u8>> {
        let (a, span_id) = self.judge(Proposal::of_json, body, authorization, arrived, "http")?;
        let response = serde_json::json!({
            "answer": a.answer,
            "reasons": a.reasons,
            "evidence": a.evidence,
            "messages": a.messages,
            "span_id": span_id,
            "decision": a.decision,
        });
        serde_json::to_vec(&response).ok()
    }

    /// A call read by `read`, weighed, and left for Python to record as the guard's step: the
    /// answer and the step's span id, or None when Python is to answer the call.
    fn judge(
        &self,
        read: fn(&[u8]) -> Option<Proposal>,
        body: &[u8],
        authorization: Option<&str>,
        arrived: Instant,
        protocol: &'static str,
    ) -> Option<(Answered, String)> {
        let packs = {
            let policy = self.policy();
            if !policy.listening || !authorized(&policy.tokens, authorization) {
                return None;
            }
            policy.packs.clone()?
        };
        let p = read(body)?;
        let asks_sessions = self.policy().asks_sessions(&packs, &p.service);
        if asks_sessions || !self.kept_or_adopted(&p.trace_id) {
            return None;
        }
        let span_id = new_span_id(&self.seed);
        let start_ns = now_ns();
        let call = OwnedRow::proposed(
            &p.trace_id,
            &span_id,
            p.parent_span_id.clone(),
            start_ns,
            (&p.service, p.version.as_deref()),
            (&p.tool, p.tool_call_id.as_deref(), &p.arguments),
        );
        let decisions = |service: &str, agent: &str, version: &str| {
            Ok::<_, ()>(self.decision_of(service, agent, version))
        };
        let judgement = self
            .answer(
                call,
                p.agent.as_deref(),
                p.version.as_deref(),
                &packs,
                decisions,
            )
            .ok()?
            .ok()?;
        let answered = judgement.answered.clone();
        let mut recorded = lock(&self.answered);
        if recorded.len() >= ANSWERED_MOST {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Some((answered, span_id));
        }
        recorded.push(Recorded {
            trace_id: p.trace_id,
            service: p.service,
            version: p.version,
            tool: p.tool,
            tool_call_id: p.tool_call_id,
            judgement,
            span_id: span_id.clone(),
            start_ns,
            end_ns: now_ns(),
            seconds: arrived.elapsed().as_secs_f64(),
            protocol,
        });
        Some((answered, span_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_found_as_bearer_auth_finds_it() {
        let tokens = vec![b"s3cret".to_vec(), b"other".to_vec()];
        assert!(authorized(&tokens, Some("Bearer s3cret")));
        assert!(authorized(&tokens, Some("bearer  other ")));
        assert!(!authorized(&tokens, Some("Bearer s3cre")));
        assert!(!authorized(&tokens, Some("Basic s3cret")));
        assert!(!authorized(&tokens, None));
        assert!(authorized(&[], None));
    }

    #[test]
    fn arguments_are_left_to_python_unless_both_write_them_alike() {
        let read = |text: &str| {
            let value: Value = serde_json::from_str(text).expect("json");
            plain(&value, 0)
        };
        assert!(read(
            r#"{"id": "C-1", "n": [1, -2, 18446744073709551615], "ok": true}"#
        ));
        assert!(!read(r#"{"amount": 1.5}"#));
        assert!(!read(r#"{"big": 18446744073709551616}"#));
        assert!(!read(r#"{"bell": "\u0007"}"#));
        assert!(read(r#"{"lines": "a\nb\tc"}"#));
    }

    #[test]
    fn a_json_call_is_read_here_only_in_its_plain_form() {
        let trace = "AB".repeat(16);
        let call = |extra: &str| {
            let body = format!(
                r#"{{"trace_id": "{trace}", "service": "desk", "tool": {{"name": "t",
                "arguments": {{"b": 1, "a": [true, null]}}}}{extra}}}"#
            );
            Proposal::of_json(body.as_bytes())
        };
        let read = call(r#", "agent": null, "version": "1.0""#).expect("plain");
        assert_eq!(read.trace_id, "ab".repeat(16));
        assert_eq!((read.agent, read.version), (None, Some("1.0".to_owned())));
        assert_eq!(read.arguments, r#"{"b":1,"a":[true,null]}"#);
        assert!(call(r#", "agent": """#).is_none()); // the model keeps ""; the message drops it
        assert!(call(r#", "extra": 1"#).is_none());
        assert!(call(r#", "version": 2"#).is_none());
        assert!(call(r#", "parent_span_id": "0000000000000000""#).is_none());
        assert!(Proposal::of_json(b"[]").is_none());
        let mcp = format!(
            r#"{{"trace_id": "{trace}", "service": "s", "tool": {{"name": "t", "kind": "mcp"}}}}"#
        );
        assert!(Proposal::of_json(mcp.as_bytes()).is_none());
    }

    #[test]
    fn ids_are_read_as_the_model_reads_them() {
        assert_eq!(hex_id(&"AB".repeat(16), 32), Some("ab".repeat(16)));
        assert_eq!(hex_id(&"0".repeat(32), 32), None);
        assert_eq!(hex_id("abc", 16), None);
    }
}
