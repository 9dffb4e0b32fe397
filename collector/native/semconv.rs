//! GenAI / OpenInference / OpenLLMetry attributes to Sextant's normalized span columns.

use serde_json::{Map, Value};

/// A span's (or event's) attributes as decoded: keys in first-seen order, later duplicates win.
pub type Attrs = Map<String, Value>;

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

/// Every normalized column of one span.
pub fn normalized(
    attrs: &Attrs,
    name: &str,
    events: &[EventView<'_>],
    status_code: i32,
) -> Normalized {
    let _ = (attrs, name, events, status_code);
    todo!("port of collector/normalize/semconv.py")
}

/// A value as the text column it fills (service.name, ...): None for null or "".
pub fn text(value: &Value) -> Option<String> {
    let _ = value;
    todo!("port of semconv.text")
}
