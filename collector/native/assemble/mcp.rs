//! MCP evidence on the steps: which calls went through an MCP server, which server, and one
//! tool step per call however many layers traced it (collector/assembler/mcp.py).

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use crate::semconv::{read_json, truthy, Read};

use super::messages::py_str;
use super::span::{remote_parent, SpanView};
use super::trajectory::Step;
use super::Fail;

const OPENLLMETRY_SCOPE: &str = "opentelemetry.instrumentation.mcp";
const SDK_SCOPE: &str = "mcp-python-sdk";
const FACTS: [(&str, &str); 4] = [
    ("mcp.session.id", "session_id"),
    ("mcp.protocol.version", "protocol_version"),
    ("jsonrpc.request.id", "request_id"),
    ("mcp.request.id", "request_id"),
];

fn openllmetry(span: &SpanView) -> bool {
    span.row
        .scope_name
        .unwrap_or("")
        .starts_with(OPENLLMETRY_SCOPE)
}

pub fn method_of(span: &SpanView) -> Result<Option<String>, Fail> {
    span.once(|m| &m.method, read_method)
}

fn read_method(span: &SpanView) -> Result<Option<String>, Fail> {
    if let Some(Value::String(m)) = span.get("mcp.method.name")? {
        if !m.is_empty() {
            return Ok(Some(m));
        }
    }
    let name = span.row.name.unwrap_or("");
    if openllmetry(span) {
        if let Some(m) = name.strip_suffix(".mcp") {
            return Ok(Some(m.to_owned()));
        }
        if name.ends_with(".tool") {
            return Ok(Some("tools/call".into()));
        }
    }
    if span.row.step_kind == Some("tool")
        && span.get("mcp.server.name")?.is_some_and(|v| truthy(&v))
    {
        return Ok(Some("tools/call".into()));
    }
    Ok(None)
}

/// A span of the MCP protocol (a request, its answer, a stream writer).
pub fn is_mcp_span(span: &SpanView) -> Result<bool, Fail> {
    Ok(method_of(span)?.is_some()
        || openllmetry(span)
        || span.row.scope_name.unwrap_or("") == SDK_SCOPE)
}

/// A span the MCP server wrote about itself.
fn server_side(span: &SpanView) -> Result<bool, Fail> {
    if span.row.kind == Some("SERVER") {
        return Ok(method_of(span)?.is_some());
    }
    if !openllmetry(span) {
        return Ok(false);
    }
    if span
        .get("traceloop.span.kind")?
        .as_ref()
        .and_then(Value::as_str)
        == Some("server")
    {
        return Ok(true);
    }
    Ok(span.row.name == Some("ResponseStreamWriter") && remote_parent(span.row))
}

/// The name a server-side span gives its server; "" when it gives none apart from its caller's.
fn own_name(
    span: &SpanView,
    spans: &[SpanView],
    by_id: &HashMap<&str, usize>,
) -> Result<String, Fail> {
    let attrs = span.attrs()?;
    if let Some(Value::String(named)) = attrs.get("mcp.server.name") {
        if !named.is_empty() {
            return Ok(named.clone());
        }
    }
    if let Some(Value::String(workflow)) = attrs.get("traceloop.workflow.name") {
        if workflow.ends_with(".mcp") && workflow.chars().count() > 4 {
            return Ok(workflow[..workflow.len() - 4].to_owned());
        }
    }
    let service = span.row.service_name;
    let caller = by_id
        .get(span.row.parent_span_id.unwrap_or(""))
        .map(|&i| &spans[i]);
    if caller.is_some_and(|c| c.row.service_name == service) {
        return Ok(String::new());
    }
    match service {
        Some(s) if !s.is_empty() && !s.starts_with("unknown_service") => Ok(s.to_owned()),
        _ => Ok(String::new()),
    }
}

/// The tool names a `tools/list` answer held, when the span recorded the answer.
fn listed_tools(span: &SpanView) -> Result<Option<Vec<String>>, Fail> {
    for key in ["traceloop.entity.output", "mcp.response.value"] {
        let value = span.attrs()?.get(key);
        let parsed;
        let answer = match value {
            Some(Value::String(text)) => match read_json(text) {
                Read::Value(v) => {
                    parsed = v;
                    &parsed
                }
                Read::Invalid => continue,
                Read::TooDeep => {
                    return Err(Fail::unsupported("a tools/list answer nests too deep"))
                }
            },
            Some(v) => v,
            None => continue,
        };
        if let Some(Value::Array(tools)) = answer.as_object().and_then(|a| a.get("tools")) {
            let mut names = BTreeSet::new();
            for t in tools {
                let Some(name) = t.as_object().and_then(|t| t.get("name")) else {
                    continue;
                };
                match name {
                    Value::String(s) => {
                        names.insert(s.clone());
                    }
                    _ => return Err(Fail::unsupported("a listed tool's name is not text")),
                }
            }
            return Ok(Some(names.into_iter().collect()));
        }
    }
    Ok(None)
}

fn blank(v: &Value) -> bool {
    v.is_null() || v.as_str() == Some("")
}

/// What one span says of its MCP call; None for a span that is not an MCP request.
fn facts_of(span: &SpanView) -> Result<Option<Map<String, Value>>, Fail> {
    let Some(method) = method_of(span)? else {
        return Ok(None);
    };
    let attrs = span.attrs()?;
    let mut facts = Map::new();
    facts.insert("method".into(), Value::String(method.clone()));
    for (key, name) in FACTS {
        if let Some(v) = attrs.get(key).filter(|v| !blank(v)) {
            if !facts.contains_key(name) {
                facts.insert(name.into(), Value::String(py_str(v)));
            }
        }
    }
    if !server_side(span)? {
        if let Some(v) = attrs.get("mcp.server.name").filter(|v| truthy(v)) {
            facts.insert("claimed_server".into(), Value::String(py_str(v)));
        }
        if let Some(address) = attrs.get("server.address").filter(|v| truthy(v)) {
            let text = match attrs.get("server.port").filter(|v| truthy(v)) {
                Some(port) => format!("{}:{}", py_str(address), py_str(port)),
                None => py_str(address),
            };
            facts.insert("address".into(), Value::String(text));
        }
    }
    if method == "tools/list" {
        if let Some(tools) = listed_tools(span)? {
            facts.insert(
                "tools".into(),
                Value::Array(tools.into_iter().map(Value::String).collect()),
            );
        }
    }
    Ok(Some(facts))
}

/// The step's ancestors, nearest first, up to the root or a parent cycle.
fn ancestors(steps: &[Step], by_span: &HashMap<String, usize>, i: usize) -> Vec<usize> {
    let mut seen = vec![steps[i].span_id.as_str()];
    let mut out = Vec::new();
    let mut parent = by_span
        .get(steps[i].parent_span_id.as_deref().unwrap_or(""))
        .copied();
    while let Some(p) = parent {
        if seen.contains(&steps[p].span_id.as_str()) {
            break;
        }
        seen.push(&steps[p].span_id);
        out.push(p);
        parent = by_span
            .get(steps[p].parent_span_id.as_deref().unwrap_or(""))
            .copied();
    }
    out
}

fn set_default(facts: &mut Map<String, Value>, key: &str, value: &str) {
    if !facts.contains_key(key) {
        facts.insert(key.into(), Value::String(value.into()));
    }
}

/// Fold the MCP layers of each call into one tool step, with the server's facts on it.
pub fn merge_mcp_calls(
    steps: &mut [Step],
    spans: &[SpanView],
    by_id: &HashMap<&str, usize>,
) -> Result<(), Fail> {
    let mut by_span: HashMap<String, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        by_span.insert(s.span_id.clone(), i);
    }
    let view = |step: &Step| &spans[by_id[step.span_id.as_str()]];
    for step in steps.iter_mut() {
        if let Some(facts) = facts_of(view(step))? {
            step.mcp = Some(facts);
        }
    }
    for i in 0..steps.len() {
        let span = view(&steps[i]);
        if server_side(span)? {
            let name = own_name(span, spans, by_id)?;
            answered_by(steps, i, &name, &by_span, spans, by_id)?;
        }
    }
    for i in 0..steps.len() {
        if steps[i].mcp.is_none() {
            continue;
        }
        let outer = ancestors(steps, &by_span, i)
            .into_iter()
            .find(|&p| steps[p].is_tool_call());
        if let Some(o) = outer {
            if steps[i].is_tool_call() && steps[o].tool_name == steps[i].tool_name {
                let mut merged = steps[i].mcp.clone().expect("checked above");
                for (k, v) in steps[o].mcp.take().unwrap_or_default() {
                    merged.insert(k, v);
                }
                steps[o].mcp = Some(merged);
                steps[i].kind = Some("other".into());
                steps[i].span_kind = Some("other".into());
            }
        }
    }
    for step in steps.iter_mut() {
        if let Some(facts) = step.mcp.as_mut() {
            resolve_server(facts);
        }
    }
    Ok(())
}

fn answered_by(
    steps: &mut [Step],
    i: usize,
    name: &str,
    by_span: &HashMap<String, usize>,
    spans: &[SpanView],
    by_id: &HashMap<&str, usize>,
) -> Result<(), Fail> {
    if let Some(facts) = steps[i].mcp.as_mut() {
        set_default(facts, "own_server", name);
    }
    let mut tool = if steps[i].is_tool_call() {
        steps[i].tool_name.clone()
    } else {
        None
    };
    for p in ancestors(steps, by_span, i) {
        let parent_span = &spans[by_id[steps[p].span_id.as_str()]];
        if server_side(parent_span)? || matches!(steps[p].kind.as_deref(), Some("agent" | "llm")) {
            return Ok(());
        }
        if steps[p].is_tool_call() {
            if let Some(t) = &tool {
                if steps[p].tool_name.as_deref() != Some(t.as_str()) {
                    return Ok(());
                }
            }
            tool = steps[p].tool_name.clone();
            if steps[p].mcp.as_ref().is_none_or(Map::is_empty) {
                let mut facts = Map::new();
                facts.insert("method".into(), Value::String("tools/call".into()));
                steps[p].mcp = Some(facts);
            }
        }
        if let Some(facts) = steps[p].mcp.as_mut() {
            set_default(facts, "own_server", name);
        }
    }
    Ok(())
}

/// `server`: the server's own name when its spans say it, else the client's claim, else its
/// address.
fn resolve_server(facts: &mut Map<String, Value>) {
    if let Some(own) = facts.shift_remove("own_server") {
        let own = own.as_str().unwrap_or("").to_owned();
        if !own.is_empty() {
            facts.insert("server".into(), Value::String(own.clone()));
            facts.insert("server_source".into(), Value::String("server".into()));
            if facts.get("claimed_server").and_then(Value::as_str) == Some(own.as_str()) {
                facts.shift_remove("claimed_server");
            }
        }
        return;
    }
    let claimed = facts.shift_remove("claimed_server");
    let claimed = claimed.filter(|c| c.as_str().is_some_and(|s| !s.is_empty()));
    let address = facts.get("address").filter(|a| truthy(a)).cloned();
    if let Some(server) = claimed.or(address) {
        facts.insert("server".into(), server);
        facts.insert("server_source".into(), Value::String("client".into()));
    }
}

/// A trace of MCP protocol chatter only: no agent, no model, no tool called.
pub fn housekeeping(ordered: &[&SpanView], steps: &[Step]) -> Result<bool, Fail> {
    if ordered.is_empty() {
        return Ok(false);
    }
    for s in ordered {
        if !is_mcp_span(s)? {
            return Ok(false);
        }
    }
    Ok(!steps.iter().any(|s| {
        s.mcp
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(Value::as_str)
            == Some("tools/call")
            || s.is_tool_call()
    }))
}
