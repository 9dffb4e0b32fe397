//! Text, tool calls and case ids read out of the message attributes of the three conventions
//! (collector/assembler/messages.py), and the Python built-ins those readings depend on.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::python;
use crate::semconv::json_or_text;
use crate::unicode::DECIMAL_ZEROS;

pub use crate::rules_value::py_eq;

/// Python's `str()` of the value orjson made of JSON: a string as it is, anything else its repr.
pub fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => python::repr(other),
    }
}

/// A JSON-looking string decoded (at most 128 levels deep), anything else as it is.
pub fn loads(value: Option<&Value>) -> Option<Cow<'_, Value>> {
    value.map(|v| json_or_text(v).0)
}

/// Python's `str.isspace()` of one character.
pub fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// A regex group `(\d+)`, Unicode decimal digits as Python matches them, read as `int()` does:
/// kept as its decimal digits without leading zeros, ordered as the integer.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Index(String);

impl Ord for Index {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Index {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn digit(c: char) -> Option<u32> {
    if c.is_ascii_digit() {
        return Some(c as u32 - '0' as u32);
    }
    let cp = c as u32;
    DECIMAL_ZEROS
        .iter()
        .find(|&&z| z <= cp && cp <= z + 9)
        .map(|&z| cp - z)
}

/// `(\d+)` at the start of `s`: the number and what follows.
fn digits(s: &str) -> Option<(Index, &str)> {
    let mut out = String::new();
    let mut end = 0;
    for (i, c) in s.char_indices() {
        match digit(c) {
            Some(d) => {
                if !(out.is_empty() && d == 0) {
                    out.push(char::from_digit(d, 10).expect("a decimal digit"));
                }
                end = i + c.len_utf8();
            }
            None => break,
        }
    }
    if end == 0 {
        return None;
    }
    if out.is_empty() {
        out.push('0');
    }
    Some((Index(out), &s[end..]))
}

/// `(a|b|...)$`: `$` also matches before one final newline.
fn one_of<'s>(rest: &str, options: &[&'s str]) -> Option<&'s str> {
    let rest = rest.strip_suffix('\n').unwrap_or(rest);
    options.iter().find(|o| **o == rest).copied()
}

/// `(.+)$`: any characters but a newline, up to the end or one final newline.
fn any_rest(rest: &str) -> Option<&str> {
    let rest = rest.strip_suffix('\n').unwrap_or(rest);
    (!rest.is_empty() && !rest.contains('\n')).then_some(rest)
}

/// `^llm\.(input|output)_messages\.(\d+)\.message\.(role|content)$`
fn oi_message(key: &str) -> Option<(&'static str, Index, &'static str)> {
    let rest = key.strip_prefix("llm.")?;
    let (direction, rest) = if let Some(r) = rest.strip_prefix("input_messages.") {
        ("input", r)
    } else {
        ("output", rest.strip_prefix("output_messages.")?)
    };
    let (index, rest) = digits(rest)?;
    let rest = rest.strip_prefix(".message.")?;
    Some((direction, index, one_of(rest, &["role", "content"])?))
}

/// `^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(.+)$`
fn oi_tool_call(key: &str) -> Option<(Index, Index, &str)> {
    let rest = key.strip_prefix("llm.output_messages.")?;
    let (i, rest) = digits(rest)?;
    let rest = rest.strip_prefix(".message.tool_calls.")?;
    let (j, rest) = digits(rest)?;
    let rest = rest.strip_prefix(".tool_call.")?;
    Some((i, j, any_rest(rest)?))
}

/// `^gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(id|name|arguments)$`
fn legacy_tool_call(key: &str) -> Option<(Index, Index, &'static str)> {
    let rest = key.strip_prefix("gen_ai.completion.")?;
    let (i, rest) = digits(rest)?;
    let rest = rest.strip_prefix(".tool_calls.")?;
    let (j, rest) = digits(rest)?;
    let rest = rest.strip_prefix('.')?;
    Some((i, j, one_of(rest, &["id", "name", "arguments"])?))
}

/// The text of one GenAI message (`parts`), or of an older `content` string.
fn parts_text(message: &Map<String, Value>) -> Option<String> {
    if let Some(Value::Array(parts)) = message.get("parts") {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|p| {
                let p = p.as_object()?;
                if p.get("type")? != "text" {
                    return None;
                }
                p.get("content")?.as_str()
            })
            .collect();
        return (!texts.is_empty()).then(|| texts.join("\n"));
    }
    match message.get("content") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// The last text of `role` in gen_ai.input.messages / gen_ai.output.messages.
fn genai_text(value: Option<&Value>, role: &str) -> Option<String> {
    let messages = loads(value)?;
    let Value::Array(messages) = &*messages else {
        return None;
    };
    let mut found = None;
    for m in messages {
        let Value::Object(m) = m else { continue };
        let same_role = match m.get("role") {
            None => true,
            Some(r) => r.as_str() == Some(role),
        };
        if same_role {
            if let Some(text) = parts_text(m).filter(|t| !t.is_empty()) {
                found = Some(text);
            }
        }
    }
    found
}

/// The last text of `role` in OpenInference's flattened `llm.{direction}_messages`.
fn openinference_text(attrs: &Map<String, Value>, direction: &str, role: &str) -> Option<String> {
    let mut by_index: BTreeMap<Index, (Option<&Value>, Option<&Value>)> = BTreeMap::new();
    for (key, value) in attrs {
        if let Some((dir, index, field)) = oi_message(key) {
            if dir == direction {
                let entry = by_index.entry(index).or_default();
                if field == "role" {
                    entry.0 = Some(value);
                } else {
                    entry.1 = Some(value);
                }
            }
        }
    }
    by_index
        .values()
        .filter(|(r, _)| r.and_then(Value::as_str) == Some(role))
        .filter_map(|(_, c)| c.and_then(Value::as_str).filter(|c| !c.is_empty()))
        .next_back()
        .map(str::to_owned)
}

/// What a model call (or an agent span) answered.
pub fn output_text(attrs: &Map<String, Value>) -> Option<String> {
    genai_text(attrs.get("gen_ai.output.messages"), "assistant")
        .or_else(|| openinference_text(attrs, "output", "assistant"))
}

/// The user's request as a model call (or an agent span) received it.
pub fn input_text(attrs: &Map<String, Value>) -> Option<String> {
    genai_text(attrs.get("gen_ai.input.messages"), "user")
        .or_else(|| openinference_text(attrs, "input", "user"))
}

/// One tool call a model asked for; None stands for a key absent or null alike (`dict.get`).
#[derive(Clone, Default, Debug)]
pub struct Call {
    pub id: Option<Value>,
    pub name: Option<Value>,
    pub arguments: Option<Value>,
}

fn some(v: Option<&Value>) -> Option<Value> {
    v.filter(|v| !v.is_null()).cloned()
}

fn loaded(v: Option<&Value>) -> Option<Value> {
    loads(v).map(Cow::into_owned).filter(|v| !v.is_null())
}

/// Tool calls a model asked for, in order.
pub fn requested_tool_calls(attrs: &Map<String, Value>) -> Vec<Call> {
    let mut calls = Vec::new();
    if let Some(messages) = loads(attrs.get("gen_ai.output.messages")) {
        if let Value::Array(messages) = &*messages {
            for message in messages {
                let Some(Value::Array(parts)) = message.as_object().and_then(|m| m.get("parts"))
                else {
                    continue;
                };
                for part in parts {
                    let Value::Object(part) = part else { continue };
                    if part.get("type").and_then(Value::as_str) == Some("tool_call") {
                        calls.push(Call {
                            id: some(part.get("id")),
                            name: some(part.get("name")),
                            arguments: loaded(part.get("arguments")),
                        });
                    }
                }
            }
        }
    }
    let mut flattened: BTreeMap<(Index, Index), Call> = BTreeMap::new();
    for (key, value) in attrs {
        if let Some((i, j, field)) = oi_tool_call(key) {
            let call = flattened.entry((i, j)).or_default();
            match field {
                "id" => call.id = some(Some(value)),
                "function.name" => call.name = some(Some(value)),
                "function.arguments" => call.arguments = loaded(Some(value)),
                _ => {}
            }
        } else if let Some((i, j, field)) = legacy_tool_call(key) {
            let call = flattened.entry((i, j)).or_default();
            match field {
                "id" => call.id = some(Some(value)),
                "name" => call.name = some(Some(value)),
                _ => call.arguments = loaded(Some(value)),
            }
        }
    }
    calls.extend(flattened.into_values());
    calls
}

/// The call a framework wrapper span was running (LangGraph's `tools` node).
pub fn context_tool_call(attrs: &Map<String, Value>) -> Option<(Call, String)> {
    for key in ["input.value", "traceloop.entity.input"] {
        let Some(value) = loads(attrs.get(key)) else {
            continue;
        };
        let Value::Object(value) = &*value else {
            continue;
        };
        let holder = match value.get("inputs") {
            Some(Value::Object(inputs)) => inputs,
            _ => value,
        };
        if let Some(Value::Object(call)) = holder.get("tool_call") {
            if let Some(Value::String(name)) = call.get("name") {
                let found = Call {
                    id: some(call.get("id")),
                    name: Some(Value::String(name.clone())),
                    arguments: some(call.get("args")),
                };
                return Some((found, name.clone()));
            }
        }
    }
    None
}

pub const CASE_KEYS: [&str; 5] = [
    "sextant.case.id",
    "dataset.example.id",
    "traceloop.association.properties.case_id",
    "traceloop.association.properties.dataset_example_id",
    "traceloop.association.properties.example_id",
];
const METADATA_CASE_KEYS: [&str; 3] = ["case_id", "dataset_example_id", "example_id"];
pub const CASE_HINTS: [&str; 2] = ["case", "example"];

fn blank(v: &Value) -> bool {
    v.is_null() || v.as_str() == Some("")
}

pub fn case_id(attrs: &Map<String, Value>) -> Option<String> {
    for key in CASE_KEYS {
        if let Some(v) = attrs.get(key).filter(|v| !blank(v)) {
            return Some(py_str(v));
        }
    }
    if let Some(metadata) = loads(attrs.get("metadata")) {
        if let Value::Object(metadata) = &*metadata {
            for key in METADATA_CASE_KEYS {
                if let Some(v) = metadata.get(key).filter(|v| !blank(v)) {
                    return Some(py_str(v));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_read_as_python_int_reads_them() {
        assert_eq!(digits("007.x").unwrap().0, Index("7".into()));
        assert_eq!(digits("٣.x").unwrap().0, Index("3".into()));
        assert!(Index("10".into()) > Index("9".into()));
        assert_eq!(one_of("role\n", &["role"]), Some("role"));
        assert_eq!(one_of("role\n\n", &["role"]), None);
        assert_eq!(any_rest("id\n"), Some("id"));
        assert_eq!(any_rest("i\nd"), None);
    }

    #[test]
    fn python_equality_of_numbers() {
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert!(py_eq(&v("{\"a\":1}"), &v("{\"a\":1.0}")));
        assert!(py_eq(&v("[true]"), &v("[1]")));
        assert!(!py_eq(&v("9007199254740993"), &v("9007199254740992.0")));
    }
}
