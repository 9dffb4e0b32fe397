//! Stored spans of one trace to a trajectory: the tree in causal order, kinds, joins and totals
//! (collector/assembler/build.py and spans.py's causal order).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::semconv::text as text_or_none;

use super::approvals::{parse_result, status_of};
use super::mcp::{housekeeping, merge_mcp_calls};
use super::messages::{
    case_id, context_tool_call, input_text, output_text, py_eq, py_str, requested_tool_calls, Call,
    CASE_HINTS, CASE_KEYS,
};
use super::span::{filled, remote_parent, Row, SpanView};
use super::{Fail, Prices};

/// One span of the run as a step (evaluators/model.py `Step`).
pub struct Step {
    /// The index of the step's span among the trace's rows given to `build_trajectory`.
    pub source: usize,
    pub seq: i32,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub depth: i32,
    pub kind: Option<String>,
    pub span_kind: Option<String>,
    pub name: String,
    pub error: bool,
    pub start: u64,
    pub end: u64,
    pub agent_name: Option<String>,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub arguments: Option<Value>,
    /// The arguments were read past 128 levels: their depth is checked when written.
    pub deep_arguments: bool,
    pub result: Option<String>,
    pub error_type: Option<String>,
    pub model: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub approval_status: Option<String>,
    pub policy_name: Option<String>,
    pub policy_decision: Option<String>,
    pub state_target: Option<String>,
    pub mcp: Option<Map<String, Value>>,
    pub requested_by: Option<String>,
}

impl Step {
    pub fn is_tool_call(&self) -> bool {
        self.span_kind.as_deref() == Some("tool")
    }

    fn kind_is(&self, kind: &str) -> bool {
        self.kind.as_deref() == Some(kind)
    }
}

/// A trajectory's own columns (the totals are found from its steps when it is written).
pub struct Trajectory {
    pub trace_id: String,
    pub revision: i32,
    pub status: &'static str,
    pub close_reason: String,
    pub agent_run: bool,
    pub service_name: Option<String>,
    pub agent_name: Option<String>,
    pub service_version: Option<String>,
    pub steps: Vec<Step>,
    pub root_span_id: Option<String>,
    pub root_name: Option<String>,
    pub case_id: Option<String>,
    pub conversation_id: Option<String>,
    pub user_id: Option<String>,
    pub input: Option<String>,
    pub final_output: Option<String>,
    pub incomplete_reasons: Vec<String>,
    pub start: u64,
    pub end: u64,
    pub span_count: usize,
    pub late_spans: usize,
}

fn owned(s: Option<&str>) -> Option<String> {
    s.map(str::to_owned)
}

/// Depth-first over the span tree, siblings by start time; and whether a parent is missing.
fn causal_order(
    spans: &[SpanView],
    by_id: &HashMap<&str, usize>,
) -> (Vec<(usize, i32)>, bool, Vec<Vec<usize>>) {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
    let mut roots = Vec::new();
    let mut missing_parent = false;
    for (i, span) in spans.iter().enumerate() {
        let row = span.row;
        match filled(row.parent_span_id) {
            Some(parent) if by_id.contains_key(parent) && parent != row.span_id => {
                children[by_id[parent]].push(i);
            }
            parent => {
                missing_parent |= parent.is_some() && !remote_parent(row);
                roots.push(i);
            }
        }
    }
    let key = |&i: &usize| (spans[i].row.start, spans[i].row.end, spans[i].row.span_id);
    let mut sorted_roots = roots.clone();
    sorted_roots.sort_by_key(key);
    let mut all: Vec<usize> = (0..spans.len()).collect();
    all.sort_by_key(key);
    let root_ids: HashSet<&str> = roots.iter().map(|&i| spans[i].row.span_id).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut ordered = Vec::with_capacity(spans.len());
    for start in sorted_roots.into_iter().chain(all) {
        if seen.contains(spans[start].row.span_id) {
            continue;
        }
        if !root_ids.contains(spans[start].row.span_id) {
            missing_parent = true; // reached only through a cycle
        }
        let mut stack = vec![(start, 0)];
        while let Some((i, depth)) = stack.pop() {
            if !seen.insert(spans[i].row.span_id) {
                continue;
            }
            ordered.push((i, depth));
            let mut kids = children[i].clone();
            kids.sort_by(|a, b| key(b).cmp(&key(a)));
            stack.extend(kids.into_iter().map(|c| (c, depth + 1)));
        }
    }
    (ordered, missing_parent, children)
}

/// Span ids of the spans that are agents.
fn real_agents<'a>(
    spans: &'a [SpanView<'a>],
    ordered: &[(usize, i32)],
    by_id: &HashMap<&str, usize>,
    children: &[Vec<usize>],
) -> Result<HashSet<&'a str>, Fail> {
    let mut agent_spans = HashSet::new();
    for &(i, _) in ordered {
        let s = &spans[i];
        if s.row.step_kind == Some("agent") && !s.is_graph_node()? {
            agent_spans.insert(s.row.span_id);
        }
    }
    let mut explicit = HashSet::new();
    for &sid in &agent_spans {
        if spans[by_id[sid]].explicit_agent()? {
            explicit.insert(sid);
        }
    }
    if explicit.is_empty() {
        return Ok(agent_spans);
    }
    Ok(agent_spans
        .iter()
        .copied()
        .filter(|sid| {
            explicit.contains(sid) || !has_named_agent_below(spans, by_id[sid], &explicit, children)
        })
        .collect())
}

fn has_named_agent_below(
    spans: &[SpanView],
    from: usize,
    explicit: &HashSet<&str>,
    children: &[Vec<usize>],
) -> bool {
    let mut stack = children[from].clone();
    let mut seen = HashSet::new();
    while let Some(child) = stack.pop() {
        if explicit.contains(spans[child].row.span_id) {
            return true;
        }
        if seen.insert(child) {
            stack.extend(children[child].iter().copied());
        }
    }
    false
}

fn step_name(row: &Row, kind: Option<&str>, agent: Option<&str>) -> String {
    if let (Some(tool), Some("tool")) = (filled(row.tool_name), kind) {
        return tool.to_owned();
    }
    if let (Some("llm" | "embedding"), Some(model)) = (kind, filled(row.model)) {
        return model.to_owned();
    }
    if let (Some("agent"), Some(agent)) = (kind, filled(agent)) {
        return agent.to_owned();
    }
    row.name.unwrap_or("").to_owned()
}

/// orjson's reading of a tool's arguments: up to 1024 levels deep.
fn read_arguments(text: &str) -> Result<(Option<Value>, bool), Fail> {
    use crate::semconv::{read_json, Read};
    match read_json(text) {
        Read::Value(v) => Ok((Some(v).filter(|v| !v.is_null()), false)),
        Read::Invalid => Err(Fail::unsupported("tool arguments are not JSON")),
        Read::TooDeep => {
            if nesting(text) > 1024 {
                return Err(Fail::unsupported("tool arguments nest past 1024 levels"));
            }
            let mut de = serde_json::Deserializer::from_str(text);
            de.disable_recursion_limit();
            let v: Value = serde::Deserialize::deserialize(&mut de)
                .and_then(|v| de.end().map(|()| v))
                .map_err(|_| Fail::unsupported("deep tool arguments are not JSON"))?;
            Ok((Some(v).filter(|v| !v.is_null()), true))
        }
    }
}

/// The deepest nesting of brackets in JSON text (outside strings).
fn nesting(text: &str) -> usize {
    let (mut depth, mut most, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                most = most.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// How many containers deep a value nests (orjson writes at most 254).
pub fn value_depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn step_of<'a>(
    span: &SpanView<'a>,
    source: usize,
    seq: usize,
    depth: i32,
    agent_spans: &HashSet<&str>,
    agent_of: &mut HashMap<&'a str, Option<String>>,
) -> Result<Step, Fail> {
    let row = span.row;
    let sid = row.span_id;
    let inherited = filled(row.parent_span_id)
        .and_then(|p| agent_of.get(p).cloned())
        .flatten();
    let mut base = row.step_kind;
    if base == Some("agent") && !agent_spans.contains(sid) {
        base = Some("other");
    }
    let own_agent = if base == Some("agent") {
        filled(row.agent_name).or(row.name)
    } else {
        None
    };
    let agent = filled(own_agent).map(str::to_owned).or(inherited);
    agent_of.insert(sid, agent.clone());
    let (arguments, deep_arguments) = match filled(row.tool_arguments) {
        Some(text) => span.once(|m| &m.arguments, |_| read_arguments(text))?,
        None => (None, false),
    };
    let llm = base == Some("llm");
    Ok(Step {
        source,
        seq: i32::try_from(seq).map_err(|_| Fail::unsupported("too many spans"))?,
        span_id: sid.to_owned(),
        parent_span_id: owned(row.parent_span_id),
        depth,
        kind: owned(base),
        span_kind: owned(base),
        name: step_name(row, base, own_agent),
        error: row.status_code == Some("ERROR"),
        start: row.start,
        end: row.end,
        agent_name: agent,
        tool_name: owned(row.tool_name),
        tool_call_id: owned(row.tool_call_id),
        arguments,
        deep_arguments,
        result: owned(row.tool_result),
        error_type: owned(row.error_type),
        model: owned(row.model),
        input_tokens: if llm { row.input_tokens } else { None },
        output_tokens: if llm { row.output_tokens } else { None },
        cost_usd: None,
        approval_status: None,
        policy_name: None,
        policy_decision: None,
        state_target: None,
        mcp: None,
        requested_by: None,
    })
}

fn number(v: Option<&Value>) -> Option<Num> {
    match v? {
        Value::Bool(b) => Some(Num::Int(i128::from(*b))),
        Value::Number(n) => Some(if let Some(i) = n.as_i64() {
            Num::Int(i128::from(i))
        } else if let Some(u) = n.as_u64() {
            Num::Int(i128::from(u))
        } else {
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn float(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// The agent's own cost attribute wins over the price table.
fn cost_of(span: &SpanView, step: &Step, prices: &Prices) -> Result<Option<f64>, Fail> {
    if span.mentions("cost") {
        for key in [
            "llm.cost.total",
            "gen_ai.usage.cost",
            "gen_ai.usage.cost_usd",
        ] {
            if let Some(n) = number(span.get(key)?.as_ref()) {
                return Ok(Some(n.float()));
            }
        }
        let prompt = number(span.get("llm.cost.prompt")?.as_ref());
        let completion = number(span.get("llm.cost.completion")?.as_ref());
        if let (Some(p), Some(c)) = (prompt, completion) {
            return Ok(Some(match (p, c) {
                (Num::Int(a), Num::Int(b)) => (a + b) as f64,
                (a, b) => a.float() + b.float(),
            }));
        }
    }
    Ok(prices.cost(step.model.as_deref(), step.input_tokens, step.output_tokens))
}

fn lower_str(v: &Value) -> String {
    py_str(v).to_lowercase()
}

/// Approval, policy and state-change steps from the `sextant.*` convention and tool names.
fn refine_kind(span: &SpanView, step: &mut Step) -> Result<(), Fail> {
    let approval = span.sextant_value("sextant.approval.status")?;
    let tool_named = || {
        let name = filled(step.tool_name.as_deref()).unwrap_or(&step.name);
        name.to_lowercase().contains("approv")
    };
    if approval.is_some() || (step.is_tool_call() && tool_named()) {
        step.kind = Some("approval".into());
        step.approval_status = match (&approval, &step.result) {
            (Some(a), _) => Some(lower_str(a)),
            (None, Some(result)) => status_of(&parse_result(result)?).map(str::to_owned),
            (None, None) => None,
        };
        return Ok(());
    }
    if let Some(decision) = span.sextant_value("sextant.policy.decision")? {
        step.kind = Some("policy".into());
        step.policy_decision = Some(lower_str(&decision));
        step.policy_name = span
            .sextant_value("sextant.policy.name")?
            .as_ref()
            .and_then(text_or_none);
        return Ok(());
    }
    if let Some(target) = span.sextant_value("sextant.state.target")? {
        step.kind = Some("state_change".into());
        step.state_target = Some(py_str(&target));
    }
    Ok(())
}

fn call_name_is(call: &Call, name: Option<&str>) -> bool {
    match (&call.name, name) {
        (None, None) => true,
        (Some(Value::String(s)), Some(n)) => s == n,
        _ => false,
    }
}

fn first_request(
    requested: &[Call],
    used: &HashSet<usize>,
    name: Option<&str>,
    arguments: Option<&Value>,
) -> Option<usize> {
    requested.iter().enumerate().position(|(i, call)| {
        if used.contains(&i) || !call_name_is(call, name) {
            return false;
        }
        match arguments {
            Some(args @ Value::Object(_)) => {
                call.arguments.as_ref().is_some_and(|a| py_eq(a, args))
            }
            _ => true,
        }
    })
}

fn is_dict(v: &Option<Value>) -> bool {
    matches!(v, Some(Value::Object(_)))
}

/// The attributes a reading needs: all of them when it walks keys by pattern (`patterns`
/// appear in the text), else only `keys`, each decoded alone.
fn needed<'s>(
    span: &'s SpanView,
    keys: &[&str],
    patterns: &[&str],
) -> Result<Cow<'s, Map<String, Value>>, Fail> {
    if patterns.iter().any(|p| span.may_have(p)) {
        return Ok(Cow::Borrowed(span.attrs()?));
    }
    let mut some = Map::new();
    for key in keys {
        if let Some(v) = span.get(key)? {
            some.insert((*key).to_owned(), v);
        }
    }
    Ok(Cow::Owned(some))
}

/// The tool calls a model call asked for.
fn asked_for(span: &SpanView) -> Result<Vec<Call>, Fail> {
    let attrs = needed(
        span,
        &["gen_ai.output.messages"],
        &["llm.output_messages.", "gen_ai.completion."],
    )?;
    Ok(requested_tool_calls(&attrs))
}

/// What a span says the user asked and the model answered.
fn texts<'s>(span: &'s SpanView) -> Result<Cow<'s, Map<String, Value>>, Fail> {
    needed(
        span,
        &["gen_ai.input.messages", "gen_ai.output.messages"],
        &["llm.input_messages.", "llm.output_messages."],
    )
}

/// Give tool steps the id and arguments their span lacks, from the call the model requested.
/// `sextant.policy.name` of the runtime guard's steps.
const GUARD_POLICY: &str = "sextant.guard";

/// A tool span holding the runtime guard's refusal of its own call did not run its tool
/// (`refused_by_guard`, collector/assembler/refusals.py): it is a `guardrail` step.
fn refused_by_guard(
    steps: &mut [Step],
    spans: &[SpanView],
    by_id: &HashMap<&str, usize>,
) -> Result<(), Fail> {
    let by_span: HashMap<String, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id.clone(), i))
        .collect();
    for i in 0..steps.len() {
        let step = &steps[i];
        if step.policy_name.as_deref() != Some(GUARD_POLICY)
            || matches!(step.policy_decision.as_deref(), None | Some("allow"))
        {
            continue;
        }
        let parent = by_span
            .get(step.parent_span_id.as_deref().unwrap_or(""))
            .copied();
        let tool = spans[by_id[step.span_id.as_str()]].get("sextant.guard.tool")?;
        let Some(p) = parent else { continue };
        let parent = &steps[p];
        let name = parent
            .tool_name
            .as_deref()
            .filter(|t| !t.is_empty())
            .unwrap_or(&parent.name);
        if parent.is_tool_call() && matches!(&tool, Some(Value::String(t)) if t == name) {
            let parent = &mut steps[p];
            parent.kind = Some("guardrail".to_owned());
            parent.span_kind = Some("guardrail".to_owned());
        }
    }
    Ok(())
}

fn join_tool_calls(
    steps: &mut [Step],
    spans: &[SpanView],
    by_id: &HashMap<&str, usize>,
    llm_order: &[usize],
) -> Result<(), Fail> {
    let tools: Vec<usize> = (0..steps.len())
        .filter(|&i| steps[i].is_tool_call())
        .collect();
    if tools.iter().all(|&i| {
        filled(steps[i].tool_call_id.as_deref()).is_some() && is_dict(&steps[i].arguments)
    }) {
        return Ok(());
    }
    let mut requested = Vec::new();
    for &s in llm_order {
        requested.extend(asked_for(&spans[s])?);
    }
    let mut used = HashSet::new();
    for i in tools {
        let step = &steps[i];
        if let Some(id) = filled(step.tool_call_id.as_deref()) {
            if is_dict(&step.arguments) {
                for (j, c) in requested.iter().enumerate() {
                    if matches!(&c.id, Some(Value::String(s)) if s == id) {
                        used.insert(j);
                    }
                }
                continue;
            }
        }
        let parent = by_id
            .get(step.parent_span_id.as_deref().unwrap_or(""))
            .map(|&p| &spans[p]);
        let context = match parent {
            Some(p) => p.once(
                |m| &m.context_call,
                |p| {
                    let keys = ["input.value", "traceloop.entity.input"];
                    Ok(context_tool_call(&*needed(p, &keys, &[])?))
                },
            )?,
            None => None,
        };
        let call = match context {
            Some((call, name)) if step.tool_name.as_deref() == Some(name.as_str()) => call,
            _ => {
                let Some(index) = first_request(
                    &requested,
                    &used,
                    step.tool_name.as_deref(),
                    step.arguments.as_ref(),
                ) else {
                    continue;
                };
                used.insert(index);
                requested[index].clone()
            }
        };
        let step = &mut steps[i];
        if !is_dict(&step.arguments) && is_dict(&call.arguments) {
            step.arguments = call.arguments.clone();
            step.deep_arguments = false;
        }
        if filled(step.tool_call_id.as_deref()).is_none() {
            step.tool_call_id = call.id.as_ref().and_then(text_or_none);
        }
    }
    Ok(())
}

/// Set each tool call's `requested_by`: the model call whose output carries its call id.
fn link_requests(
    steps: &mut [Step],
    spans: &[SpanView],
    by_id: &HashMap<&str, usize>,
) -> Result<(), Fail> {
    let mut requester: HashMap<String, String> = HashMap::new();
    for step in steps.iter() {
        if step.kind_is("llm") {
            for call in asked_for(&spans[by_id[step.span_id.as_str()]])? {
                if let Some(id) = call.id.as_ref().and_then(text_or_none) {
                    requester.entry(id).or_insert_with(|| step.span_id.clone());
                }
            }
        }
    }
    for step in steps.iter_mut() {
        if step.is_tool_call() {
            if let Some(id) = filled(step.tool_call_id.as_deref()) {
                step.requested_by = requester.get(id).cloned();
            }
        }
    }
    Ok(())
}

fn is_create_agent(span: &SpanView) -> Result<bool, Fail> {
    let Some(name) = span.row.name else {
        return Err(Fail::Build(
            "AttributeError: 'NoneType' object has no attribute 'startswith'".into(),
        ));
    };
    Ok(name.starts_with("create_agent")
        || (span.mentions("create_agent")
            && span
                .get("gen_ai.operation.name")?
                .as_ref()
                .and_then(Value::as_str)
                == Some("create_agent")))
}

/// The repeated task this run belongs to: the first span (root first) that names one.
fn find_case_id(ordered: &[&SpanView]) -> Result<Option<String>, Fail> {
    for span in ordered {
        let found = span.once(
            |m| &m.case,
            |span| {
                if !CASE_HINTS.iter().any(|w| span.mentions(w)) {
                    return Ok(None);
                }
                let keys = [&CASE_KEYS[..], &["metadata"]].concat();
                Ok(case_id(&*needed(span, &keys, &[])?).filter(|f| !f.is_empty()))
            },
        )?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

pub fn build_trajectory(
    trace_id: &str,
    rows: &[&Row],
    prices: &Prices,
    revision: i32,
    close_reason: &str,
    late_spans: usize,
) -> Result<Trajectory, Fail> {
    let spans: Vec<SpanView> = rows.iter().map(|r| SpanView::new(r)).collect();
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(spans.len());
    for (i, s) in spans.iter().enumerate() {
        by_id.insert(s.row.span_id, i);
    }
    let (ordered, missing_parent, children) = causal_order(&spans, &by_id);
    let agent_spans = real_agents(&spans, &ordered, &by_id, &children)?;
    let mut steps = Vec::with_capacity(ordered.len());
    let mut agent_of = HashMap::new();
    let mut llm_order = Vec::new();
    for (seq, &(i, depth)) in ordered.iter().enumerate() {
        let span = &spans[i];
        let mut step = step_of(span, i, seq, depth, &agent_spans, &mut agent_of)?;
        if step.kind_is("llm") {
            llm_order.push(i);
            step.cost_usd = cost_of(span, &step, prices)?;
        }
        if span.once(|m| &m.sextant, |s| Ok(s.mentions("sextant.")))?
            || (step.kind_is("tool") && step.name.to_lowercase().contains("approv"))
        {
            refine_kind(span, &mut step)?;
        }
        steps.push(step);
    }
    merge_mcp_calls(&mut steps, &spans, &by_id)?;
    refused_by_guard(&mut steps, &spans, &by_id)?;
    join_tool_calls(&mut steps, &spans, &by_id, &llm_order)?;
    link_requests(&mut steps, &spans, &by_id)?;

    let in_order: Vec<&SpanView> = ordered.iter().map(|&(i, _)| &spans[i]).collect();
    let roots: Vec<&SpanView> = ordered
        .iter()
        .filter(|(_, d)| *d == 0)
        .map(|&(i, _)| &spans[i])
        .collect();
    let root = roots
        .iter()
        .find(|s| filled(s.row.parent_span_id).is_none() || remote_parent(s.row))
        .copied();
    let first = root.or(roots.first().copied());
    let mut top_agent = None;
    for s in &in_order {
        if agent_spans.contains(s.row.span_id) && s.explicit_agent()? {
            top_agent = Some(*s);
            break;
        }
    }
    let top_agent = top_agent.or_else(|| {
        in_order
            .iter()
            .find(|s| agent_spans.contains(s.row.span_id))
            .copied()
    });
    let mut close_reason = close_reason.to_owned();
    if close_reason == "incomplete_timeout" && root.is_some() && revision > 1 {
        close_reason = "complete".into();
    }
    let mut reasons: Vec<String> = Vec::new();
    if root.is_none() {
        reasons.push("root_missing".into());
    }
    if missing_parent {
        reasons.push("parent_missing".into());
    }
    if close_reason != "complete" {
        reasons.push(close_reason.clone());
    }
    let mut all_create = true;
    for s in &in_order {
        if !is_create_agent(s)? {
            all_create = false;
            break;
        }
    }
    let agent_run = !all_create && !housekeeping(&in_order, &steps)?;
    let status = if !reasons.is_empty() {
        "incomplete"
    } else if root.is_some_and(|r| r.row.status_code == Some("ERROR")) {
        "error"
    } else {
        "ok"
    };
    let anchor = match first {
        Some(f) => texts(f)?,
        None => Cow::Owned(Map::new()),
    };
    let anchor = &*anchor;
    let input = match input_text(anchor) {
        Some(t) => Some(t),
        None => match llm_order.first() {
            Some(&i) => input_text(&*texts(&spans[i])?),
            None => None,
        },
    };
    let final_output = match output_text(anchor) {
        Some(t) => Some(t),
        None => match llm_order.last() {
            Some(&i) => output_text(&*texts(&spans[i])?),
            None => None,
        },
    };
    let case = find_case_id(&in_order)?;
    Ok(Trajectory {
        trace_id: trace_id.to_owned(),
        revision,
        status,
        close_reason,
        agent_run,
        service_name: first.and_then(|f| owned(f.row.service_name)),
        agent_name: top_agent.and_then(|t| owned(filled(t.row.agent_name).or(t.row.name))),
        service_version: first.and_then(|f| owned(f.row.service_version)),
        root_span_id: root.map(|r| r.row.span_id.to_owned()),
        root_name: root.and_then(|r| owned(r.row.name)),
        case_id: case,
        conversation_id: in_order
            .iter()
            .find_map(|s| filled(s.row.conversation_id))
            .map(str::to_owned),
        user_id: in_order
            .iter()
            .find_map(|s| filled(s.row.user_id))
            .map(str::to_owned),
        input,
        final_output,
        incomplete_reasons: reasons,
        start: in_order.iter().map(|s| s.row.start).min().unwrap_or(0),
        end: in_order.iter().map(|s| s.row.end).max().unwrap_or(0),
        span_count: in_order.len(),
        late_spans,
        steps,
    })
}
