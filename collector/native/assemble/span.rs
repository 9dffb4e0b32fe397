//! One stored span of a closing trace, borrowed from the round's Arrow columns, with its
//! attribute JSON decoded only when something needs it (collector/assembler/spans.py).

use std::cell::OnceCell;

use serde_json::{Map, Value};

use crate::semconv::{read_json, Read};

use super::Fail;

/// The columns of `spans` the builder reads, one row.
pub struct Row<'a> {
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub parent_span_id: Option<&'a str>,
    pub flags: Option<u32>,
    pub name: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub scope_name: Option<&'a str>,
    pub start: u64,
    pub end: u64,
    pub status_code: Option<&'a str>,
    pub step_kind: Option<&'a str>,
    pub tool_name: Option<&'a str>,
    pub tool_call_id: Option<&'a str>,
    pub tool_arguments: Option<&'a str>,
    pub tool_result: Option<&'a str>,
    pub model: Option<&'a str>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub agent_name: Option<&'a str>,
    pub conversation_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub error_type: Option<&'a str>,
    pub service_name: Option<&'a str>,
    pub service_version: Option<&'a str>,
    pub attributes: Option<&'a str>,
    pub events: Option<&'a str>,
    /// Microseconds since the epoch.
    pub received_at: i64,
}

/// A row and its decoded attributes.
pub struct SpanView<'a> {
    pub row: &'a Row<'a>,
    attrs: OnceCell<Map<String, Value>>,
}

/// Python's truth of an optional text: None and "" are false.
pub fn filled(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

pub const REMOTE_PARENT: u32 = 0x300;

/// The parent lives in another service's trace data: the span is a local root.
pub fn remote_parent(row: &Row) -> bool {
    filled(row.parent_span_id).is_some() && row.flags.unwrap_or(0) & REMOTE_PARENT == REMOTE_PARENT
}

/// JSON text as orjson reads it, for text the builder decodes whole (a span's attributes or
/// events, a tool's arguments): refused when it is not JSON or nests past what this reads.
pub fn loads(text: &str, what: &str) -> Result<Value, Fail> {
    match read_json(text) {
        Read::Value(v) => Ok(v),
        Read::Invalid => Err(Fail::unsupported(format!("{what} is not JSON"))),
        Read::TooDeep => Err(Fail::unsupported(format!("{what} nests too deep"))),
    }
}

impl<'a> SpanView<'a> {
    pub fn new(row: &'a Row<'a>) -> Self {
        Self {
            row,
            attrs: OnceCell::new(),
        }
    }

    pub fn attrs(&self) -> Result<&Map<String, Value>, Fail> {
        if let Some(a) = self.attrs.get() {
            return Ok(a);
        }
        let parsed = match loads(self.row.attributes.unwrap_or("{}"), "span attributes")? {
            Value::Object(m) => m,
            _ => return Err(Fail::unsupported("span attributes are not an object")),
        };
        Ok(self.attrs.get_or_init(|| parsed))
    }

    /// Whether the attributes may hold `key`: the decoder writes keys as they are (they need
    /// no escaping), so attribute JSON without the text has no such key and is not decoded
    /// (a span's attributes are always an object; text that is not one is still decoded,
    /// and refused).
    pub fn may_have(&self, key: &str) -> bool {
        let text = self.row.attributes.unwrap_or("{}");
        !text.starts_with('{') || text.contains(key)
    }

    /// `attrs.get(key)`, decoding the attributes only when they may hold it.
    pub fn get(&self, key: &str) -> Result<Option<&Value>, Fail> {
        if !self.may_have(key) {
            return Ok(None);
        }
        Ok(self.attrs()?.get(key))
    }

    pub fn mentions(&self, text: &str) -> bool {
        self.row.attributes.unwrap_or("").contains(text)
            || self.row.events.unwrap_or("").contains(text)
    }

    /// A `sextant.*` attribute of the span, or of one of its events (None for JSON null).
    pub fn sextant_value(&self, key: &str) -> Result<Option<Value>, Fail> {
        if !self.mentions(key) {
            return Ok(None);
        }
        if let Some(v) = self.attrs()?.get(key) {
            return Ok(Some(v.clone()).filter(|v| !v.is_null()));
        }
        let events = loads(self.row.events.unwrap_or("[]"), "span events")?;
        let Value::Array(events) = events else {
            return Err(Fail::unsupported("span events are not a list"));
        };
        for event in events {
            let Value::Object(event) = event else {
                return Err(Fail::unsupported("a span event is not an object"));
            };
            match event.get("attributes") {
                None => {}
                Some(Value::Object(attrs)) => {
                    if let Some(v) = attrs.get(key) {
                        return Ok(Some(v.clone()).filter(|v| !v.is_null()));
                    }
                }
                Some(_) => return Err(Fail::unsupported("event attributes are not an object")),
            }
        }
        Ok(None)
    }

    /// LangGraph + OpenInference marks every node visit AGENT; those are not agents.
    pub fn is_graph_node(&self) -> Result<bool, Fail> {
        if !self.mentions("langgraph_node") {
            return Ok(false);
        }
        Ok(match self.attrs()?.get("metadata") {
            None => false,
            Some(v) => super::messages::py_str(v).contains("langgraph_node"),
        })
    }

    pub fn explicit_agent(&self) -> Result<bool, Fail> {
        for key in ["gen_ai.agent.name", "agent.name"] {
            if self.get(key)?.is_some_and(crate::semconv::truthy) {
                return Ok(true);
            }
        }
        let name = self.row.name.unwrap_or("");
        Ok(name.starts_with("invoke_agent ")
            || name.starts_with("create_agent ")
            || name.ends_with(".agent"))
    }
}
