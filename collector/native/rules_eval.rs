//! The native rule interpreter: a compiled pack's rules over a round's runs, as
//! `evaluators/evaluate.py` `evaluate_pack` and the evaluators of each rule type give them
//! (messages, evidence, scores and reason codes included).

use std::cell::OnceCell;
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::rules_keywords::Keywords;
use crate::rules_pack::{Budget, Check, Matcher, Order, Pack, Pattern, Rule};
use crate::rules_value::{at_path, py_eq, python_g, python_lower, Defer};

const BUILD_ERROR: &str = "build_error";
const OVERRIDE: &str = "sextant.approval.status";

/// One run: the columns of its `trajectories` row the rules read.
#[derive(Debug, Default, Clone)]
pub struct Run<'a> {
    pub trace_id: &'a str,
    pub revision: i32,
    pub status: Option<&'a str>,
    pub incomplete_reasons: Vec<&'a str>,
    pub agent_run: bool,
    pub service_name: Option<&'a str>,
    pub agent_name: Option<&'a str>,
    pub service_version: Option<&'a str>,
    pub root_span_id: Option<&'a str>,
    pub input: Option<&'a str>,
    pub final_output: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub start_time_unix_nano: u64,
    pub end_time_unix_nano: u64,
}

/// One step: its `steps` row, plus the span's attributes (JSON text), which the table does
/// not carry but an approval override is read from.
#[derive(Debug, Clone)]
pub struct StepRow<'a> {
    pub seq: i32,
    pub span_id: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub span_kind: Option<&'a str>,
    pub name: Option<&'a str>,
    pub agent_name: Option<&'a str>,
    pub tool_name: Option<&'a str>,
    pub arguments: Option<&'a str>,
    pub status: Option<&'a str>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub result: Option<&'a str>,
    pub attributes: Option<&'a str>,
    /// The step's MCP facts (JSON text), NULL for a step that is not MCP.
    pub mcp: Option<&'a str>,
    /// Whether the span's attributes carry an approval override (`has_override`), read once
    /// for every pack; Err when they cannot be read as Python reads them.
    pub approval_override: Result<bool, Defer>,
    pub start_time_unix_nano: u64,
    pub end_time_unix_nano: u64,
    pub tool_call_id: Option<&'a str>,
    /// The span id of the model call that asked for this tool call.
    pub requested_by: Option<&'a str>,
    /// The builder's approval status (its default recogniser, or the override).
    pub approval_status: Option<&'a str>,
}

/// A step as a pack's rules see it: its kind after the pack's approval recogniser, its
/// arguments parsed on first use.
pub struct Step<'a> {
    pub row: &'a StepRow<'a>,
    pub kind: Option<&'a str>,
    args: OnceCell<Option<Value>>,
    attributes: OnceCell<Option<Map<String, Value>>>,
}

impl<'a> Step<'a> {
    pub(crate) fn is_tool_call(&self) -> bool {
        self.row.span_kind == Some("tool")
    }

    fn kind_is(&self, kind: &str) -> bool {
        self.kind == Some(kind)
    }

    pub(crate) fn arguments(&self) -> Result<&Value, Defer> {
        let parsed = self.args.get_or_init(|| match self.row.arguments {
            None => Some(Value::Null),
            Some(text) => serde_json::from_str(text).ok(),
        });
        parsed.as_ref().ok_or(Defer("arguments that are not JSON"))
    }

    /// `Step.attributes`: the span's attributes, `{}` when it has none.
    pub(crate) fn attributes(&self) -> Result<&Map<String, Value>, Defer> {
        let parsed = self.attributes.get_or_init(|| match self.row.attributes {
            None | Some("") => Some(Map::new()),
            Some(text) => match serde_json::from_str(text) {
                Ok(Value::Object(map)) => Some(map),
                _ => None,
            },
        });
        parsed
            .as_ref()
            .ok_or(Defer("span attributes that are not a JSON object"))
    }

    pub(crate) fn name(&self) -> &'a str {
        py(self.row.name)
    }
}

/// A Python f-string's rendering of an optional text.
pub(crate) fn py(text: Option<&str>) -> &str {
    text.unwrap_or("None")
}

/// What one rule concluded about one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding<'a> {
    pub verdict: &'static str,
    pub message: String,
    pub evidence: Vec<Option<&'a str>>,
    pub score: Option<f64>,
    pub reason: Option<String>,
}

impl<'a> Finding<'a> {
    pub(crate) fn new(
        verdict: &'static str,
        message: String,
        evidence: Vec<Option<&'a str>>,
    ) -> Self {
        Finding {
            verdict,
            message,
            evidence,
            score: None,
            reason: None,
        }
    }
}

/// `tuple(dict.fromkeys(evidence))`: each span once, first place kept.
pub(crate) fn unique(evidence: Vec<Option<&str>>) -> Vec<Option<&str>> {
    let mut seen = std::collections::HashSet::new();
    evidence.into_iter().filter(|e| seen.insert(*e)).collect()
}

fn text_matches(patterns: &[Pattern], value: Option<&str>) -> bool {
    value.is_some_and(|v| patterns.iter().any(|p| p.matches(v)))
}

impl Matcher {
    pub(crate) fn matches(&self, step: &Step) -> Result<bool, Defer> {
        if let Some(kinds) = &self.kinds {
            let hit = |k: Option<&str>| k.is_some_and(|k| kinds.iter().any(|x| x == k));
            if !hit(step.kind) && !hit(step.row.span_kind) {
                return Ok(false);
            }
        }
        if let Some(name) = &self.name {
            if !name.matches(step.row.name) {
                return Ok(false);
            }
        }
        if let Some(agent) = &self.agent {
            if !agent.matches(step.row.agent_name) {
                return Ok(false);
            }
        }
        if let Some(status) = &self.status {
            if step.row.status != Some(status.as_str()) {
                return Ok(false);
            }
        }
        if !self.attributes.is_empty() {
            let attributes = step.attributes()?;
            for (key, condition) in &self.attributes {
                if !condition.check(attributes.get(key))? {
                    return Ok(false);
                }
            }
        }
        if !self.args.is_empty() {
            let arguments = step.arguments()?;
            for check in &self.args {
                if !check.condition.check(at_path(arguments, &check.parts))? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

fn matching<'s, 'a>(m: &Matcher, steps: &'s [Step<'a>]) -> Result<Vec<&'s Step<'a>>, Defer> {
    let mut out = Vec::new();
    for s in steps {
        if m.matches(s)? {
            out.push(s);
        }
    }
    Ok(out)
}

fn span_ids<'a>(steps: &[&Step<'a>]) -> Vec<Option<&'a str>> {
    steps.iter().map(|s| s.row.span_id).collect()
}

fn presence<'a>(
    steps: &[Step<'a>],
    m: &Matcher,
    min: u64,
    max: Option<u64>,
) -> Result<Finding<'a>, Defer> {
    let found = matching(m, steps)?;
    let n = found.len() as u64;
    let what = &m.describe;
    let evidence = span_ids(&found);
    if n < min {
        let msg = format!("{what} occurred {n} times, expected at least {min}");
        return Ok(Finding::new("fail", msg, evidence));
    }
    if let Some(max) = max.filter(|max| n > *max) {
        let msg = format!("{what} occurred {n} times, at most {max} allowed");
        return Ok(Finding::new("fail", msg, evidence));
    }
    Ok(Finding::new(
        "pass",
        format!("{what} occurred {n} times"),
        evidence,
    ))
}

fn absence<'a>(
    steps: &[Step<'a>],
    m: Option<&Matcher>,
    allowed: &[Pattern],
) -> Result<Finding<'a>, Defer> {
    let (found, what) = match m {
        Some(m) => (matching(m, steps)?, format!("forbidden {}", m.describe)),
        None => (
            steps
                .iter()
                .filter(|s| s.is_tool_call() && !text_matches(allowed, s.row.tool_name))
                .collect(),
            "tool outside the allow-list".to_owned(),
        ),
    };
    if found.is_empty() {
        return Ok(Finding::new("pass", format!("no {what}"), Vec::new()));
    }
    let mut names: Vec<&str> = found.iter().map(|s| s.name()).collect();
    names.sort_unstable();
    names.dedup();
    let msg = format!("{what} occurred: {}", names.join(", "));
    Ok(Finding::new("fail", msg, span_ids(&found)))
}

fn hits(expected: &[Matcher], steps: &[Step]) -> Result<Vec<Vec<bool>>, Defer> {
    expected
        .iter()
        .map(|m| steps.iter().map(|s| m.matches(s)).collect())
        .collect()
}

/// The most expected steps found in order, gaps allowed (a longest common subsequence).
fn in_order<'s, 'a>(
    steps: &'s [Step<'a>],
    expected: &[Matcher],
) -> Result<Vec<&'s Step<'a>>, Defer> {
    let hits = hits(expected, steps)?;
    let (n, k) = (expected.len(), steps.len());
    let mut best = vec![vec![0u32; k + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..k).rev() {
            let take = if hits[i][j] {
                best[i + 1][j + 1] + 1
            } else {
                0
            };
            best[i][j] = take.max(best[i + 1][j]).max(best[i][j + 1]);
        }
    }
    let mut matched = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < k {
        if hits[i][j] && best[i][j] == best[i + 1][j + 1] + 1 {
            matched.push(&steps[j]);
            i += 1;
            j += 1;
        } else if best[i + 1][j] >= best[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    Ok(matched)
}

/// The longest contiguous run matching the expected sequence from its start, among the steps
/// of the expected kinds (every step when a matcher names no kind).
fn strict<'s, 'a>(steps: &'s [Step<'a>], expected: &[Matcher]) -> Result<Vec<&'s Step<'a>>, Defer> {
    let any_kind = expected.iter().any(|m| m.kinds.is_none());
    let kinds: Vec<&str> = expected
        .iter()
        .flat_map(|m| m.kinds.iter().flatten().map(String::as_str))
        .collect();
    let of_kind = |k: Option<&str>| k.is_some_and(|k| kinds.contains(&k));
    let among: Vec<&Step> = steps
        .iter()
        .filter(|s| any_kind || kinds.is_empty() || of_kind(s.kind) || of_kind(s.row.span_kind))
        .collect();
    let mut best: Vec<&Step> = Vec::new();
    for start in 0..among.len() {
        let mut run = Vec::new();
        for (offset, m) in expected.iter().enumerate() {
            match among.get(start + offset) {
                Some(s) if m.matches(s)? => run.push(*s),
                _ => break,
            }
        }
        if run.len() > best.len() {
            best = run;
        }
    }
    Ok(best)
}

/// The most expected steps matched to distinct steps (augmenting paths, in Python's order).
fn any_order<'s, 'a>(
    steps: &'s [Step<'a>],
    expected: &[Matcher],
) -> Result<Vec<&'s Step<'a>>, Defer> {
    let mut candidates = Vec::with_capacity(expected.len());
    for m in expected {
        let mut c = Vec::new();
        for (j, s) in steps.iter().enumerate() {
            if m.matches(s)? {
                c.push(j);
            }
        }
        candidates.push(c);
    }
    let mut owner: HashMap<usize, usize> = HashMap::new();
    fn assign(
        i: usize,
        seen: &mut std::collections::HashSet<usize>,
        candidates: &[Vec<usize>],
        owner: &mut HashMap<usize, usize>,
    ) -> bool {
        for &j in &candidates[i] {
            if !seen.insert(j) {
                continue;
            }
            let free = match owner.get(&j) {
                None => true,
                Some(&other) => assign(other, seen, candidates, owner),
            };
            if free {
                owner.insert(j, i);
                return true;
            }
        }
        false
    }
    for i in 0..expected.len() {
        assign(i, &mut Default::default(), &candidates, &mut owner);
    }
    let mut taken: Vec<usize> = owner.into_keys().collect();
    taken.sort_unstable();
    Ok(taken.into_iter().map(|j| &steps[j]).collect())
}

fn trajectory<'a>(
    steps: &[Step<'a>],
    expected: &[Matcher],
    order: &Order,
    order_name: &str,
    min_match_rate: f64,
) -> Result<Finding<'a>, Defer> {
    let matched = match order {
        Order::Strict => strict(steps, expected)?,
        Order::Gaps => in_order(steps, expected)?,
        Order::Any => any_order(steps, expected)?,
    };
    let rate = matched.len() as f64 / expected.len() as f64;
    let evidence = span_ids(&matched);
    let summary = format!(
        "{} of {} expected steps ({order_name}), match rate",
        matched.len(),
        expected.len()
    );
    if rate + 1e-9 >= min_match_rate {
        let mut f = Finding::new("pass", format!("{summary} {rate:.2}"), evidence);
        f.score = Some(rate);
        return Ok(f);
    }
    let mut missing = None;
    for m in expected {
        let mut any = false;
        for s in &matched {
            if m.matches(s)? {
                any = true;
                break;
            }
        }
        if !any {
            missing = Some(m);
            break;
        }
    }
    let hint = missing
        .map(|m| format!("; first missing: {}", m.describe))
        .unwrap_or_default();
    let msg = format!("{summary} {rate:.2} below {min_match_rate:.2}{hint}");
    let mut f = Finding::new("fail", msg, evidence);
    f.score = Some(rate);
    Ok(f)
}

fn tool_args<'a>(
    steps: &[Step<'a>],
    m: &Matcher,
    args: &[crate::rules_pack::ArgCheck],
    required: bool,
) -> Result<Finding<'a>, Defer> {
    let mut calls = Vec::new();
    for s in steps {
        if s.is_tool_call() && m.matches(s)? {
            calls.push(s);
        }
    }
    if calls.is_empty() {
        let verdict = if required { "fail" } else { "not_applicable" };
        return Ok(Finding::new(
            verdict,
            format!("no {} call", m.describe),
            Vec::new(),
        ));
    }
    let mut wrong: Vec<(&Step, Vec<&str>)> = Vec::new();
    for s in &calls {
        let arguments = s.arguments()?;
        let mut bad = Vec::new();
        for a in args {
            if !a.condition.check(at_path(arguments, &a.parts))? {
                bad.push(a.path.as_str());
            }
        }
        if !bad.is_empty() {
            wrong.push((s, bad));
        }
    }
    if !wrong.is_empty() {
        let detail: Vec<String> = wrong
            .iter()
            .map(|(s, b)| format!("{} (seq {}): {}", s.name(), s.row.seq, b.join(", ")))
            .collect();
        let evidence = wrong.iter().map(|(s, _)| s.row.span_id).collect();
        let mut f = Finding::new(
            "fail",
            format!("arguments do not satisfy the rule: {}", detail.join("; ")),
            evidence,
        );
        f.score = Some(1.0 - wrong.len() as f64 / calls.len() as f64);
        return Ok(f);
    }
    let mut f = Finding::new(
        "pass",
        format!("{} call(s) with valid arguments", calls.len()),
        span_ids(&calls),
    );
    f.score = Some(1.0);
    Ok(f)
}

/// orjson's `OPT_SORT_KEYS` text of a value, up to what tells two values apart: keys sorted,
/// ints and floats kept apart (1 is not 1.0), as `same_call` compares calls.
fn sorted_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                sorted_json(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                sorted_json(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Steps grouped by key wherever they occur, groups in order of first occurrence.
fn repeated<'s, 'a, K: std::hash::Hash + Eq>(
    tools: &[&'s Step<'a>],
    keys: &[K],
) -> Vec<Vec<&'s Step<'a>>> {
    let mut index: HashMap<&K, usize> = HashMap::new();
    let mut groups: Vec<Vec<&Step>> = Vec::new();
    for (s, k) in tools.iter().zip(keys) {
        let i = *index.entry(k).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(s);
    }
    groups
}

/// Steps grouped by key only while they follow each other.
fn runs_of<'s, 'a, K: Eq>(tools: &[&'s Step<'a>], keys: &[K]) -> Vec<Vec<&'s Step<'a>>> {
    let mut runs: Vec<Vec<&Step>> = Vec::new();
    for (i, s) in tools.iter().enumerate() {
        if i > 0 && keys[i - 1] == keys[i] {
            if let Some(last) = runs.last_mut() {
                last.push(s);
                continue;
            }
        }
        runs.push(vec![s]);
    }
    runs
}

fn budget<'a>(run: &Run, steps: &[Step<'a>], b: &Budget) -> Result<Finding<'a>, Defer> {
    let mut over_: Vec<String> = Vec::new();
    let mut evidence: Vec<Option<&'a str>> = Vec::new();
    let llm = || steps.iter().filter(|s| s.kind_is("llm"));
    let total = |over_: &mut Vec<String>, name: &str, limit: Option<f64>, value: Option<f64>| {
        if let (Some(l), Some(v)) = (limit, value) {
            if v > l {
                over_.push(format!("{name} {} > {}", python_g(v), python_g(l)));
            }
        }
    };
    let tools: Vec<&Step> = steps.iter().filter(|s| s.is_tool_call()).collect();
    total(&mut over_, "steps", b.max_steps, Some(steps.len() as f64));
    total(
        &mut over_,
        "tool calls",
        b.max_tool_calls,
        Some(tools.len() as f64),
    );
    total(
        &mut over_,
        "LLM calls",
        b.max_llm_calls,
        Some(llm().count() as f64),
    );
    if let Some(limit) = b.max_tokens {
        let tokens: i128 = llm()
            .map(|s| {
                s.row.input_tokens.unwrap_or(0) as i128 + s.row.output_tokens.unwrap_or(0) as i128
            })
            .sum();
        // An int against an int limit (`max_tokens` is an int of at most 2^53), exactly.
        if tokens > limit as i128 {
            over_.push(format!(
                "tokens {} > {}",
                python_g(tokens as f64),
                python_g(limit)
            ));
        }
    }
    let costs: Vec<f64> = llm().filter_map(|s| s.row.cost_usd).collect();
    let cost = (!costs.is_empty()).then(|| costs.iter().fold(0.0, |a, c| a + c));
    if b.max_cost_usd.is_some() {
        total(&mut over_, "cost USD", b.max_cost_usd, cost);
    }
    if b.max_duration_ms.is_some() {
        let ns = run.end_time_unix_nano as i128 - run.start_time_unix_nano as i128;
        total(
            &mut over_,
            "duration ms",
            b.max_duration_ms,
            Some(ns as f64 / 1e6),
        );
    }
    let mut checks: Vec<(u64, Vec<Vec<&Step>>, &str)> = Vec::new();
    if b.max_same_call.is_some() || b.max_consecutive_same_call.is_some() {
        let mut calls = Vec::with_capacity(tools.len());
        for s in &tools {
            let mut text = String::new();
            sorted_json(s.arguments()?, &mut text);
            calls.push((s.row.tool_name, text));
        }
        if let Some(limit) = b.max_same_call {
            checks.push((limit, repeated(&tools, &calls), "with the same arguments"));
        }
        if let Some(limit) = b.max_consecutive_same_call {
            let label = "in a row with the same arguments";
            checks.push((limit, runs_of(&tools, &calls), label));
        }
    }
    if let Some(limit) = b.max_same_tool {
        let names: Vec<Option<&str>> = tools.iter().map(|s| s.row.tool_name).collect();
        checks.push((limit, repeated(&tools, &names), "in total"));
    }
    for (limit, groups, label) in checks {
        for group in groups {
            if group.len() as u64 > limit {
                over_.push(format!(
                    "{} called {} times {label} (> {limit})",
                    py(group[0].row.tool_name),
                    group.len()
                ));
                evidence.extend(group.iter().map(|s| s.row.span_id));
            }
        }
    }
    if !over_.is_empty() {
        let msg = format!("over budget: {}", over_.join("; "));
        return Ok(Finding::new("fail", msg, unique(evidence)));
    }
    let unpriced = llm().filter(|s| s.row.cost_usd.is_none()).count();
    if b.max_cost_usd.is_some() && unpriced > 0 {
        let mut f = Finding::new(
            "review",
            format!(
                "cost unknown for {unpriced} model call(s) without a price; the priced ones cost {} USD",
                python_g(cost.filter(|c| *c != 0.0).unwrap_or(0.0))
            ),
            Vec::new(),
        );
        f.reason = Some("cost_unknown".into());
        return Ok(f);
    }
    Ok(Finding::new("pass", "within budget".into(), Vec::new()))
}

fn recovery<'a>(run: &Run<'a>, steps: &[Step<'a>], require_retry: bool) -> Finding<'a> {
    let tools: Vec<&Step> = steps.iter().filter(|s| s.is_tool_call()).collect();
    let mut problems: Vec<String> = Vec::new();
    let mut evidence: Vec<Option<&'a str>> = Vec::new();
    let final_output = run.final_output.is_some_and(|o| !o.is_empty());
    if let (Some(last_tool), Some(last)) = (tools.last(), steps.last()) {
        if last_tool.row.status == Some("error") && std::ptr::eq(*last_tool, last) {
            problems.push(format!(
                "the run ends with the failed call {}",
                last_tool.name()
            ));
            evidence.push(last_tool.row.span_id);
        }
    }
    if run.status == Some("error") && !final_output {
        problems.push("the run failed without telling the user".into());
        if let Some(root) = run.root_span_id.filter(|r| !r.is_empty()) {
            evidence.push(Some(root));
        }
    }
    if require_retry && !final_output {
        let mut last_ok: HashMap<Option<&str>, i32> = HashMap::new();
        for s in &tools {
            if s.row.status == Some("ok") {
                let e = last_ok.entry(s.row.tool_name).or_insert(s.row.seq);
                *e = (*e).max(s.row.seq);
            }
        }
        for failed in tools.iter().filter(|s| s.row.status == Some("error")) {
            let retried = last_ok
                .get(&failed.row.tool_name)
                .is_some_and(|seq| *seq > failed.row.seq);
            if !retried {
                problems.push(format!(
                    "{} (seq {}) failed and was not retried",
                    failed.name(),
                    failed.row.seq
                ));
                evidence.push(failed.row.span_id);
            }
        }
    }
    let errors = tools
        .iter()
        .filter(|s| s.row.status == Some("error"))
        .count();
    if !problems.is_empty() {
        return Finding::new("fail", problems.join("; "), unique(evidence));
    }
    if errors > 0 {
        let msg = format!("{errors} failed tool call(s), all recovered");
        return Finding::new("pass", msg, Vec::new());
    }
    Finding::new("pass", "no failed tool calls".into(), Vec::new())
}

/// Whether a secrets rule finds something in a text: false when the rule's set finds nothing
/// in ASCII text, or only its keyword net does (`password`, `token`...) and no keyword
/// assignment holds a credential (judged as `keyword_secret` judges it: then the maintained
/// set's `api_key` is what is found). Anything else (a token format, another detector, a
/// pattern of the pack's, or non-ASCII text, where Python's Unicode classes apply) is for
/// the Python detectors to confirm.
fn scan(set: &regex::RegexSet, keywords: Option<&Keywords>, text: &str) -> Result<bool, Defer> {
    if !text.is_ascii() {
        return Err(Defer("non-ASCII text for the secrets detectors"));
    }
    let matched = set.matches(text);
    if !matched.matched_any() {
        return Ok(false);
    }
    match keywords {
        Some(k) if matched.iter().eq([k.index]) => Ok(k.keyword_secret(text)),
        _ => Err(Defer("a possible secret, for the detectors to confirm")),
    }
}

fn secrets<'a>(
    steps: &[Step<'a>],
    arguments: bool,
    results: bool,
    names: &[String],
    set: &regex::RegexSet,
    keywords: Option<&Keywords>,
) -> Result<Finding<'a>, Defer> {
    let mut hits: Vec<String> = Vec::new();
    let mut evidence: Vec<Option<&'a str>> = Vec::new();
    for step in steps.iter().filter(|s| s.is_tool_call()) {
        let mut found = |found: bool, place: &str| {
            if found {
                // a keyword secret is the built-in api_key's (the only name the net is under)
                hits.push(format!(
                    "api_key in the {place} of {} (seq {})",
                    step.name(),
                    step.row.seq
                ));
                evidence.push(step.row.span_id);
            }
        };
        if let (true, Some(text)) = (arguments, step.row.arguments) {
            // `texts`: text arguments as they are, others as orjson writes them (the column)
            if text.starts_with('"') {
                let Ok(Value::String(own)) = serde_json::from_str::<Value>(text) else {
                    return Err(Defer("arguments that are not JSON"));
                };
                found(scan(set, keywords, &own)?, "arguments");
            } else {
                found(scan(set, keywords, text)?, "arguments");
            }
        }
        if let (true, Some(text)) = (results, step.row.result.filter(|r| !r.is_empty())) {
            found(scan(set, keywords, text)?, "result");
        }
    }
    if !hits.is_empty() {
        return Ok(Finding::new("fail", hits.join("; "), unique(evidence)));
    }
    let msg = format!("no {} in tool calls", names.join(", "));
    Ok(Finding::new("pass", msg, Vec::new()))
}

/// An MCP fact the rule reads: absent, or text (what the assembler writes); anything else is
/// for Python to render.
fn fact<'v>(facts: &'v Map<String, Value>, key: &str) -> Result<Option<&'v str>, Defer> {
    match facts.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Defer("MCP facts that are not text")),
    }
}

/// `refusal`: why the rule refuses this call (None when it may be made); `?` when it cannot
/// tell.
fn mcp_refusal(
    facts: &Map<String, Value>,
    tool: &str,
    servers: Option<&crate::rules_pack::Globs>,
    anywhere: Option<&[Pattern]>,
    by_server: Option<&[(Pattern, Vec<Pattern>)]>,
) -> Result<Option<String>, Defer> {
    let server = fact(facts, "server")?;
    let claimed = fact(facts, "claimed_server")?;
    if let (Some(claimed), Some(server)) = (claimed, server) {
        if !claimed.is_empty() && !server.is_empty() {
            return Ok(Some(format!(
                "{tool}: the client named server {claimed}, the server's own spans name it {server}"
            )));
        }
    }
    if let Some(globs) = anywhere {
        if !text_matches(globs, Some(tool)) {
            return Ok(Some(format!("tool {tool} is not allowed")));
        }
    }
    let Some(server) = server else {
        if servers.is_some() || by_server.is_some() {
            return Ok(Some("?".into()));
        }
        return Ok(None);
    };
    if servers.is_some_and(|g| !g.matches(Some(server))) {
        return Ok(Some(format!(
            "{tool} on server {server}, which is not allowed"
        )));
    }
    if let Some(by_server) = by_server {
        let allowed: Vec<Pattern> = by_server
            .iter()
            .filter(|(glob, _)| glob.matches(server))
            .flat_map(|(_, tools)| tools.iter().cloned())
            .collect();
        if !text_matches(&allowed, Some(tool)) {
            return Ok(Some(format!(
                "tool {tool} is not allowed on server {server}"
            )));
        }
    }
    Ok(None)
}

fn mcp<'a>(
    steps: &[Step<'a>],
    servers: Option<&crate::rules_pack::Globs>,
    anywhere: Option<&[Pattern]>,
    by_server: Option<&[(Pattern, Vec<Pattern>)]>,
    unknown_server: &str,
) -> Result<Finding<'a>, Defer> {
    let mut calls = Vec::new();
    for s in steps.iter().filter(|s| s.is_tool_call()) {
        let Some(text) = s.row.mcp else { continue };
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(facts)) => calls.push((s, facts)),
            Ok(Value::Null) => {}
            _ => return Err(Defer("MCP facts that are not a JSON object")),
        }
    }
    if calls.is_empty() {
        return Ok(Finding::new(
            "not_applicable",
            "no MCP tool call".into(),
            Vec::new(),
        ));
    }
    let mut refused: Vec<(Option<&'a str>, String)> = Vec::new();
    let mut unknown: Vec<Option<&'a str>> = Vec::new();
    for (step, facts) in &calls {
        let tool = step
            .row
            .tool_name
            .filter(|t| !t.is_empty())
            .unwrap_or(step.name());
        match mcp_refusal(facts, tool, servers, anywhere, by_server)?.as_deref() {
            Some("?") if unknown_server != "fail" => unknown.push(step.row.span_id),
            Some("?") => refused.push((
                step.row.span_id,
                format!(
                    "{} on a server the trace does not name",
                    py(step.row.tool_name)
                ),
            )),
            Some(why) => refused.push((step.row.span_id, why.to_owned())),
            None => {}
        }
    }
    if !refused.is_empty() {
        let msg: Vec<&str> = refused.iter().map(|(_, why)| why.as_str()).collect();
        let evidence = refused.iter().map(|(id, _)| *id).collect();
        return Ok(Finding::new("fail", msg.join("; "), evidence));
    }
    if !unknown.is_empty() && unknown_server == "review" {
        let mut f = Finding::new(
            "review",
            format!(
                "{} MCP call(s) to a server the trace does not name",
                unknown.len()
            ),
            unknown,
        );
        f.reason = Some("mcp_server_unknown".into());
        return Ok(f);
    }
    let mut names: Vec<&str> = Vec::new();
    for (_, facts) in &calls {
        names.push(
            fact(facts, "server")?
                .filter(|s| !s.is_empty())
                .unwrap_or("unnamed"),
        );
    }
    names.sort_unstable();
    names.dedup();
    let msg = format!("{} MCP call(s) allowed ({})", calls.len(), names.join(", "));
    Ok(Finding::new("pass", msg, Vec::new()))
}

fn consistency<'a>(
    run: &Run<'a>,
    steps: &[Step<'a>],
    m: &Matcher,
    attribute: &str,
    root_attribute: Option<&str>,
    missing_pass: bool,
) -> Result<Finding<'a>, Defer> {
    let root = run
        .root_span_id
        .and_then(|id| steps.iter().find(|s| s.row.span_id == Some(id)));
    let key = root_attribute.unwrap_or(attribute);
    let expected = match root {
        Some(r) => r.attributes()?.get(key).filter(|v| !v.is_null()),
        None => None,
    };
    let mut matching = Vec::new();
    for s in steps {
        if !root.is_some_and(|r| std::ptr::eq(r, s)) && m.matches(s)? {
            matching.push(s);
        }
    }
    if matching.is_empty() {
        let msg = format!("no {} step", m.describe);
        return Ok(Finding::new("not_applicable", msg, Vec::new()));
    }
    let Some(expected) = expected else {
        if missing_pass {
            let msg = format!("the root span has no {key} to compare with (missing: pass)");
            return Ok(Finding::new("pass", msg, Vec::new()));
        }
        let msg = format!("the root span has no {key} to compare with");
        return Ok(Finding::new("review", msg, Vec::new()));
    };
    let mut wrong = Vec::new();
    for s in &matching {
        let attributes = s.attributes()?;
        let value = attributes.get(attribute);
        let differs = !value.is_some_and(|v| py_eq(v, expected));
        if differs && !(missing_pass && value.is_none()) {
            wrong.push(*s);
        }
    }
    if !wrong.is_empty() {
        let names: Vec<String> = wrong
            .iter()
            .map(|s| format!(" {} (seq {})", s.name(), s.row.seq))
            .collect();
        let msg = format!(
            "{} step(s) ran with a {attribute} other than the root's {key}:{}",
            wrong.len(),
            names.join(", ")
        );
        return Ok(Finding::new("fail", msg, span_ids(&wrong)));
    }
    let msg = format!("{} step(s) share the root's {key}", matching.len());
    Ok(Finding::new("pass", msg, Vec::new()))
}

pub(crate) fn finding<'a>(
    run: &Run<'a>,
    steps: &[Step<'a>],
    rule: &Rule,
) -> Result<Finding<'a>, Defer> {
    match &rule.check {
        Check::Budget(b) => budget(run, steps, b),
        Check::Recovery { require_retry } => Ok(recovery(run, steps, *require_retry)),
        Check::Presence {
            step,
            min_count,
            max_count,
        } => presence(steps, step, *min_count, *max_count),
        Check::Absence {
            step,
            allowed_tools,
        } => absence(steps, step.as_ref(), allowed_tools),
        Check::Trajectory {
            expected,
            order,
            order_name,
            min_match_rate,
        } => trajectory(steps, expected, order, order_name, *min_match_rate),
        Check::ToolArgs {
            step,
            args,
            required,
        } => tool_args(steps, step, args, *required),
        Check::Mcp {
            servers,
            tools_anywhere,
            tools_by_server,
            unknown_server,
        } => mcp(
            steps,
            servers.as_ref(),
            tools_anywhere.as_deref(),
            tools_by_server.as_deref(),
            unknown_server,
        ),
        Check::Consistency {
            step,
            attribute,
            root_attribute,
            missing_pass,
        } => consistency(
            run,
            steps,
            step,
            attribute,
            root_attribute.as_deref(),
            *missing_pass,
        ),
        Check::Secrets {
            arguments,
            results,
            names,
            set,
            keywords,
        } => secrets(steps, *arguments, *results, names, set, keywords.as_ref()),
        Check::Precedes(rule) => crate::rules_precedes::precedes(steps, rule),
        Check::Flow(flow) => crate::rules_flow::evaluate(run, steps, flow),
        Check::Retrieval(r) => crate::rules_retrieval::evaluate(run, steps, r),
    }
}

/// `evaluate_rule`: a build error is a review; on an incomplete run, a verdict missing steps
/// could change is a review (`trace_incomplete`).
pub fn evaluate_rule<'a>(
    run: &Run<'a>,
    steps: &[Step<'a>],
    rule: &Rule,
) -> Result<Finding<'a>, Defer> {
    if run.incomplete_reasons.contains(&BUILD_ERROR) {
        let mut f = Finding::new(
            "review",
            "the trace could not be built into steps".into(),
            Vec::new(),
        );
        f.reason = Some(BUILD_ERROR.into());
        return Ok(f);
    }
    let f = finding(run, steps, rule)?;
    if run.status != Some("incomplete") || f.verdict == "review" {
        return Ok(f);
    }
    if f.verdict == "fail" && !f.evidence.is_empty() && !rule.needs_all_steps {
        return Ok(f);
    }
    Ok(Finding {
        verdict: "review",
        message: format!(
            "trace incomplete ({}); would be {}: {}",
            run.incomplete_reasons.join(", "),
            f.verdict,
            f.message
        ),
        evidence: f.evidence,
        score: f.score,
        reason: Some("trace_incomplete".into()),
    })
}

/// Whether the span's attributes carry an approval override (`sextant.approval.status` not
/// null): then the step is an approval whatever its tool. Only a text that names the key (or
/// escapes a character, which could spell it) is parsed.
pub fn has_override(attributes: Option<&str>) -> Result<bool, Defer> {
    let Some(text) = attributes.filter(|t| !t.is_empty()) else {
        return Ok(false);
    };
    let finds = |needle: &str| memchr::memmem::find(text.as_bytes(), needle.as_bytes()).is_some();
    if !finds(OVERRIDE) && !finds("\\u") {
        return Ok(false);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map.get(OVERRIDE).is_some_and(|v| !v.is_null())),
        _ => Err(Defer("span attributes that are not a JSON object")),
    }
}

/// The steps as the pack's approval recogniser reads them (`with_approvals`): a tool call of
/// an approval tool, or a step with an override, is of kind `approval`.
pub fn steps_of<'a>(rows: &'a [StepRow<'a>], pack: &Pack) -> Result<Vec<Step<'a>>, Defer> {
    rows.iter()
        .map(|row| {
            let tool = row.span_kind == Some("tool");
            let mut kind = row.kind;
            if tool || kind == Some("approval") {
                let named = || {
                    let name = row.tool_name.filter(|t| !t.is_empty()).or(row.name);
                    let lower = python_lower(name.unwrap_or(""));
                    pack.approval_tools.iter().any(|p| p.matches(&lower))
                };
                let explicit = match &row.approval_override {
                    Ok(explicit) => *explicit,
                    Err(Defer(why)) => return Err(Defer(why)),
                };
                if explicit || (tool && named()) {
                    kind = Some("approval");
                }
            }
            Ok(Step {
                row,
                kind,
                args: OnceCell::new(),
                attributes: OnceCell::new(),
            })
        })
        .collect()
}

/// One result of `evaluate_pack`, or a rule the interpreter leaves to Python for this run.
pub enum Outcome<'a> {
    Result(&'a Rule, Finding<'a>),
    Deferred(&'a Rule, &'static str),
}

/// `evaluate_pack` over one run, for the pack's native rules.
pub fn evaluate_run<'a>(
    pack: &'a Pack,
    run: &Run<'a>,
    rows: &'a [StepRow<'a>],
) -> Vec<Outcome<'a>> {
    if !run.agent_run {
        return Vec::new();
    }
    let selects = [
        (&pack.service, run.service_name),
        (&pack.agent, run.agent_name),
        (&pack.service_version, run.service_version),
    ]
    .iter()
    .all(|(globs, value)| globs.as_ref().is_none_or(|g| g.matches(*value)));
    if !selects {
        return Vec::new();
    }
    let rules = pack.rules.iter().filter(|r| !r.session);
    let steps = match steps_of(rows, pack) {
        Ok(steps) => steps,
        Err(Defer(why)) => return rules.map(|r| Outcome::Deferred(r, why)).collect(),
    };
    let input = run
        .input
        .filter(|i| !i.is_empty())
        .map(|i| Value::String(i.to_owned()));
    let mut out = Vec::new();
    for rule in rules {
        if let Some(condition) = &rule.when_input {
            match condition.check(input.as_ref()) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(Defer(why)) => {
                    out.push(Outcome::Deferred(rule, why));
                    continue;
                }
            }
        }
        out.push(match evaluate_rule(run, &steps, rule) {
            Ok(f) => Outcome::Result(rule, f),
            Err(Defer(why)) => Outcome::Deferred(rule, why),
        });
    }
    out
}

/// `result_of`: the decision a finding asks for, and its reason code.
pub fn requested(rule: &Rule, f: &Finding) -> (Option<String>, Option<String>) {
    let requested = match f.verdict {
        "fail" => Some(rule.on_fail.clone()),
        "review" => Some("REVIEW".to_owned()),
        _ => None,
    };
    let decided = f.verdict == "fail" || f.verdict == "review";
    let reason = f
        .reason
        .clone()
        .or_else(|| decided.then(|| rule.reason.clone()))
        .filter(|r| !r.is_empty());
    (requested, reason)
}
