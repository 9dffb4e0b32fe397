//! `precedes` (evaluators/precedes.py): every step B the rule guards needs a step A before it,
//! an approval before a privileged write. A's status is read as the pack's approval
//! recogniser reads it (evaluators/approvals.py: the span's `sextant.approval.status`
//! override, else the approval tool's parsed result, else the builder's status), then A is
//! narrowed by agent, by time or causal order and by subject (evaluators/authorization.py).
//! Verdicts, reason codes, messages and evidence are the Python evaluator's. What this
//! module cannot read or render as Python does (a tool result in a Python literal form the
//! reader leaves to Python, a non-ASCII value a message quotes) defers the run's result to
//! Python.

use serde_json::{Map, Value};

use crate::assemble::approvals::{parse_result_exact, status_of as default_status};
use crate::assemble::messages::py_space;
use crate::rules_eval::{unique, Finding, Step};
use crate::rules_pack::{
    matcher, path_part, take_bool, take_str, Matcher, PathPart, Pattern, Refused,
};
use crate::rules_value::{at_path, py_eq, python_lower, same, Defer};

/// How far a step may seem to start before another ended and still count as after it
/// (`evaluators/model.py` CLOCK_SLACK_NS).
const CLOCK_SLACK_NS: u128 = 1_000_000;
const SUBJECT_UNKNOWN: &str = "approval_subject_unknown";
const CAUSAL_UNKNOWN: &str = "causal_order_unknown";
const OVERRIDE: &str = "sextant.approval.status";
/// Values nested deeper than this in a message or a comparison are left to Python (whose
/// recursion limit they could reach).
const MAX_NESTING: usize = 100;

/// A JSON path as the rule wrote it and as `at_path` splits it.
#[derive(Debug)]
pub struct Path {
    text: String,
    parts: Vec<PathPart>,
}

/// `SubjectBinding`: a path of the approval (its arguments or its parsed result) that must
/// equal a path of the action's arguments.
#[derive(Debug)]
pub struct Binding {
    in_result: bool,
    approval: Path,
    action: Path,
}

impl Binding {
    /// `SubjectBinding.approval_path()`.
    fn approval_path(&self) -> String {
        let side = if self.in_result {
            "result"
        } else {
            "arguments"
        };
        format!("{side} {}", self.approval.text)
    }
}

/// `ApprovalShape`: a place in an approval tool's result and the values that mean granted,
/// refused or not decided.
#[derive(Debug)]
pub struct Shape {
    parts: Vec<PathPart>,
    approved: Vec<Value>,
    denied: Vec<Value>,
    pending: Vec<Value>,
}

/// The pack's approval recogniser (`pack.approvals or DEFAULT_APPROVALS`).
#[derive(Debug)]
pub struct Approvals {
    /// `tools`, lower-cased (matched against the lower-cased tool name).
    tools: Vec<Pattern>,
    shapes: Vec<Shape>,
    defaults: bool,
}

/// A `precedes` rule, compiled.
#[derive(Debug)]
pub struct Precedes {
    before: Matcher,
    then: Matcher,
    require_ok: bool,
    same_agent: bool,
    require_approved: bool,
    same_subject: Vec<Binding>,
    subject_reason: String,
    causal: bool,
    causal_reason: String,
    approvals: Approvals,
}

fn path(fields: &mut Map<String, Value>, text: &str, parts: &str) -> Result<Path, Refused> {
    let bad = || Refused(format!("same_subject: {text} is not a split JSON path"));
    let (Some(Value::String(text)), Some(Value::Array(parts))) =
        (fields.remove(text), fields.remove(parts))
    else {
        return Err(bad());
    };
    let parts = parts
        .iter()
        .map(path_part)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    Ok(Path { text, parts })
}

/// The native form's binding: `{"approval": "arguments"|"result", "approval_path",
/// "approval_parts", "action_path", "action_parts"}`.
fn binding(value: Value) -> Result<Binding, Refused> {
    let Value::Object(mut f) = value else {
        return Err(Refused("same_subject: not a list of bindings".into()));
    };
    let in_result = match take_str(&mut f, "approval", "")?.as_str() {
        "arguments" => false,
        "result" => true,
        other => return Err(Refused(format!("same_subject: approval side {other:?}"))),
    };
    let approval = path(&mut f, "approval_path", "approval_parts")?;
    let action = path(&mut f, "action_path", "action_parts")?;
    if let Some(other) = f.keys().next() {
        return Err(Refused(format!("same_subject.{other}: not read natively")));
    }
    Ok(Binding {
        in_result,
        approval,
        action,
    })
}

fn values(fields: &mut Map<String, Value>, key: &str) -> Result<Vec<Value>, Refused> {
    match fields.remove(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(Refused(format!("approvals.results.{key}: not a list"))),
    }
}

fn shape(value: Value) -> Result<Shape, Refused> {
    let Value::Object(mut f) = value else {
        return Err(Refused("approvals.results: not a list of shapes".into()));
    };
    if let Some(why) = f.get("python_only_value") {
        return Err(Refused(format!(
            "approvals.results: python_only_value: {why}"
        )));
    }
    let parts = match f.remove("parts") {
        Some(Value::Array(parts)) => parts.iter().map(path_part).collect::<Option<Vec<_>>>(),
        _ => None,
    }
    .ok_or_else(|| Refused("approvals.results: a shape without a split path".into()))?;
    let shape = Shape {
        parts,
        approved: values(&mut f, "approved")?,
        denied: values(&mut f, "denied")?,
        pending: values(&mut f, "pending")?,
    };
    if let Some(other) = f.keys().next() {
        // `python_only_value`: a value JSON does not carry as Python holds it
        return Err(Refused(format!(
            "approvals.results.{other}: not read natively"
        )));
    }
    Ok(shape)
}

fn approvals(value: Option<Value>) -> Result<Approvals, Refused> {
    let Some(Value::Object(mut f)) = value else {
        return Err(Refused(
            "approvals: the pack's recogniser is not given".into(),
        ));
    };
    let tools = match f.remove("tools") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(|g| Pattern::new(&python_lower(g))))
            .collect::<Option<Result<Vec<_>, _>>>(),
        _ => None,
    }
    .ok_or_else(|| Refused("approvals.tools: not a list of globs".into()))??;
    let shapes = match f.remove("results") {
        Some(Value::Array(items)) => items.into_iter().map(shape).collect::<Result<_, _>>()?,
        _ => return Err(Refused("approvals.results: not a list of shapes".into())),
    };
    let defaults = take_bool(&mut f, "defaults", true)?;
    if let Some(other) = f.keys().next() {
        return Err(Refused(format!("approvals.{other}: not read natively")));
    }
    Ok(Approvals {
        tools,
        shapes,
        defaults,
    })
}

/// The rule from its native form's fields (those it reads are taken out of `f`).
pub fn compile(f: &mut Map<String, Value>) -> Result<Precedes, Refused> {
    let before = matcher(f.remove("before").unwrap_or(Value::Null), "before")?;
    let then = matcher(f.remove("then").unwrap_or(Value::Null), "then")?;
    let same_subject = match f.remove("same_subject") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.into_iter().map(binding).collect::<Result<_, _>>()?,
        Some(_) => return Err(Refused("same_subject: not a list of bindings".into())),
    };
    Ok(Precedes {
        before,
        then,
        require_ok: take_bool(f, "require_ok", false)?,
        same_agent: take_bool(f, "same_agent", false)?,
        require_approved: take_bool(f, "require_approved", false)?,
        same_subject,
        subject_reason: take_str(f, "subject_reason", "wrong_authorization_context")?,
        causal: take_bool(f, "causal", false)?,
        causal_reason: take_str(f, "causal_reason", "decided_before_approval")?,
        approvals: approvals(f.remove("approvals"))?,
    })
}

/// An approval status as the rule reads it: only approved and denied mean anything.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Status {
    Approved,
    Denied,
    Other,
}

fn word(status: &str) -> Status {
    match status {
        "approved" => Status::Approved,
        "denied" => Status::Denied,
        _ => Status::Other,
    }
}

/// `same_value`: strings compare without case (the value stripped); true is never 1.
fn same_value(value: &Value, expected: &Value) -> bool {
    match (value, expected) {
        (Value::String(v), Value::String(e)) => {
            python_lower(v.trim_matches(py_space)) == python_lower(e)
        }
        _ => same(value, expected),
    }
}

/// `Approvals.status_of`: the pack's shapes, then (unless `defaults: false`) the defaults.
fn status_of(result: &Value, approvals: &Approvals) -> Status {
    for shape in &approvals.shapes {
        let Some(value) = at_path(result, &shape.parts) else {
            continue;
        };
        for (status, values) in [
            (Status::Approved, &shape.approved),
            (Status::Denied, &shape.denied),
            (Status::Other, &shape.pending),
        ] {
            if values.iter().any(|v| same_value(value, v)) {
                return status;
            }
        }
    }
    if approvals.defaults {
        return default_status(result).map_or(Status::Other, word);
    }
    Status::Other
}

/// `Step.result_value`: the tool's result parsed (None when it has none).
fn result_value(step: &Step) -> Result<Value, Defer> {
    match step.row.result {
        None => Ok(Value::Null),
        Some(text) => parse_result_exact(text)
            .map_err(|_| Defer("a tool result not read natively as Python reads it")),
    }
}

/// The step's approval status after `with_approvals`: the override, else the status of an
/// approval tool's result, else the builder's.
fn status(step: &Step, approvals: &Approvals) -> Result<Status, Defer> {
    let row = step.row;
    let tool = step.is_tool_call();
    if tool || row.kind == Some("approval") {
        if row.approval_override? {
            return Ok(match step.attributes()?.get(OVERRIDE) {
                Some(Value::String(s)) => word(&python_lower(s)),
                _ => Status::Other, // `str()` of another value is neither word
            });
        }
        let name = row.tool_name.filter(|t| !t.is_empty()).or(row.name);
        let lower = python_lower(name.unwrap_or(""));
        if tool && approvals.tools.iter().any(|p| p.matches(&lower)) {
            if row.result.is_none() {
                return Ok(Status::Other);
            }
            return Ok(status_of(&result_value(step)?, approvals));
        }
    }
    Ok(row.approval_status.map_or(Status::Other, word))
}

/// `grants`: whether step A, once matched, may stand before a B.
fn grants(rule: &Precedes, a: &Step) -> Result<bool, Defer> {
    let status = status(a, &rule.approvals)?;
    if status == Status::Denied {
        return Ok(false);
    }
    if rule.require_approved && (a.kind != Some("approval") || status != Status::Approved) {
        return Ok(false);
    }
    Ok(!rule.require_ok || a.row.status == Some("ok"))
}

/// One B's verdict: pass, or fail/review with the reason code, message and evidence.
struct Outcome<'s, 'a> {
    verdict: &'static str,
    reason: Option<String>,
    message: String,
    evidence: Vec<&'s Step<'a>>,
}

impl<'s, 'a> Outcome<'s, 'a> {
    fn pass() -> Self {
        Outcome {
            verdict: "pass",
            reason: None,
            message: String::new(),
            evidence: Vec::new(),
        }
    }
}

fn label(step: &Step) -> String {
    format!("{} (seq {})", step.name(), step.row.seq)
}

/// `judge`: the A's that may stand before this B, narrowed by time (or causality), then
/// subject. `grantable` holds, step by step, whether it matches `before` and `grants`.
fn judge<'s, 'a>(
    steps: &'s [Step<'a>],
    grantable: &[bool],
    rule: &Precedes,
    b: &'s Step<'a>,
) -> Result<Outcome<'s, 'a>, Defer> {
    let granting: Vec<&'s Step<'a>> = steps
        .iter()
        .zip(grantable)
        .filter(|(a, ok)| {
            **ok && !std::ptr::eq(*a, b)
                && (!rule.same_agent || a.row.agent_name == b.row.agent_name)
        })
        .map(|(a, _)| a)
        .collect();
    let start = u128::from(b.row.start_time_unix_nano) + CLOCK_SLACK_NS;
    // by time, not tree order: an approval in an earlier sibling subtree counts
    let by_clock: Vec<&'s Step<'a>> = granting
        .iter()
        .copied()
        .filter(|a| u128::from(a.row.end_time_unix_nano) <= start)
        .collect();
    if (if rule.causal { &granting } else { &by_clock }).is_empty() {
        return Ok(Outcome {
            verdict: "fail",
            reason: None,
            message: format!(
                "{} ran without a preceding {}",
                label(b),
                rule.before.describe
            ),
            evidence: vec![b],
        });
    }
    let earlier = if rule.causal {
        match decided_before(steps, rule, b, &granting, &by_clock) {
            Ok(earlier) => earlier,
            Err(outcome) => return Ok(outcome),
        }
    } else {
        by_clock
    };
    same_subject(rule, b, &earlier)
}

/// `decided_after`: whether the model call that asked for the action started once the
/// approval had its result (and is not the call that asked for the approval itself).
fn decided_after(approval: &Step, model_call: &Step) -> bool {
    if approval.row.requested_by.is_some() && approval.row.requested_by == model_call.row.span_id {
        return false;
    }
    u128::from(approval.row.end_time_unix_nano)
        <= u128::from(model_call.row.start_time_unix_nano) + CLOCK_SLACK_NS
}

/// `decided_before`: the A's whose result existed when the model call that asked for B
/// started, or the outcome when there is none (a failure) or it cannot tell (a review).
fn decided_before<'s, 'a>(
    steps: &'s [Step<'a>],
    rule: &Precedes,
    b: &'s Step<'a>,
    granting: &[&'s Step<'a>],
    by_clock: &[&'s Step<'a>],
) -> Result<Vec<&'s Step<'a>>, Outcome<'s, 'a>> {
    // `requester`: the model call that asked for this step, when the instrumentation says
    let asked_by = b
        .row
        .requested_by
        .and_then(|id| steps.iter().find(|s| s.row.span_id == Some(id)));
    let Some(asked_by) = asked_by else {
        if let Some(last) = by_clock.last() {
            // an A ended before B began, but B may have been decided before A's answer
            let why = match b.row.tool_call_id {
                None => "it has no tool-call id".to_owned(),
                Some(id) => format!("no model output names its call id {id}"),
            };
            return Err(Outcome {
                verdict: "review",
                reason: Some(CAUSAL_UNKNOWN.into()),
                message: format!(
                    "{}: which model call asked for it is not recorded ({why})",
                    label(b)
                ),
                evidence: vec![last, b],
            });
        }
        // every A had its result only after B began
        let a = granting[0];
        return Err(Outcome {
            verdict: "fail",
            reason: Some(rule.causal_reason.clone()),
            message: format!("{} began before {} had its result", label(b), label(a)),
            evidence: vec![a, b, b],
        });
    };
    let earlier: Vec<&'s Step<'a>> = granting
        .iter()
        .copied()
        .filter(|a| decided_after(a, asked_by))
        .collect();
    if !earlier.is_empty() {
        return Ok(earlier);
    }
    let a = granting[0];
    Err(Outcome {
        verdict: "fail",
        reason: Some(rule.causal_reason.clone()),
        message: format!(
            "{} was asked for by {}, which started before {} had its result",
            label(b),
            label(asked_by),
            label(a)
        ),
        evidence: vec![a, asked_by, b],
    })
}

/// `check_subject`: Some(true/false), or None (cannot tell), with the detail.
fn check_subject(
    a: &Step,
    b: &Step,
    bindings: &[Binding],
) -> Result<(Option<bool>, String), Defer> {
    for binding in bindings {
        let Some(wanted) = at_path(b.arguments()?, &binding.action.parts) else {
            let detail = format!("{} has no argument {}", label(b), binding.action.text);
            return Ok((None, detail));
        };
        let result;
        let document = if binding.in_result {
            result = result_value(a)?;
            &result
        } else {
            a.arguments()?
        };
        let Some(granted) = at_path(document, &binding.approval.parts) else {
            let what = if !binding.in_result && a.arguments()?.is_null() {
                "no arguments recorded".to_owned()
            } else if binding.in_result && a.row.result.is_none() {
                "no result recorded".to_owned()
            } else {
                format!("nothing at {}", binding.approval_path())
            };
            return Ok((None, format!("{} has {what}", label(a))));
        };
        if nesting(granted) > MAX_NESTING || nesting(wanted) > MAX_NESTING {
            return Err(Defer("values nested too deep to compare natively"));
        }
        if !py_eq(granted, wanted) {
            let detail = format!(
                "{} approved {} = {}, {} acts on {} = {}",
                label(a),
                binding.approval_path(),
                crate::python::repr(granted),
                label(b),
                binding.action.text,
                crate::python::repr(wanted)
            );
            return Ok((Some(false), detail));
        }
    }
    Ok((Some(true), "same subject".into()))
}

/// `same_subject`: whether one of the A's before B names B's subject (always, without
/// bindings).
fn same_subject<'s, 'a>(
    rule: &Precedes,
    b: &'s Step<'a>,
    earlier: &[&'s Step<'a>],
) -> Result<Outcome<'s, 'a>, Defer> {
    if rule.same_subject.is_empty() {
        return Ok(Outcome::pass());
    }
    let mut checks = Vec::with_capacity(earlier.len());
    for a in earlier {
        checks.push((*a, check_subject(a, b, &rule.same_subject)?));
    }
    if checks
        .iter()
        .any(|(_, (matches, _))| *matches == Some(true))
    {
        return Ok(Outcome::pass());
    }
    if let Some((a, (_, detail))) = checks.iter().rev().find(|(_, (m, _))| m.is_none()) {
        return Ok(Outcome {
            verdict: "review",
            reason: Some(SUBJECT_UNKNOWN.into()),
            message: format!(
                "cannot tell whether the approval covers {}: {detail}",
                label(b)
            ),
            evidence: vec![a, b],
        });
    }
    let (a, (_, detail)) = checks.pop().expect("an A stands before B");
    Ok(Outcome {
        verdict: "fail",
        reason: Some(rule.subject_reason.clone()),
        message: detail,
        evidence: vec![a, b],
    })
}

/// `evaluate_precedes`.
pub fn precedes<'a>(steps: &[Step<'a>], rule: &Precedes) -> Result<Finding<'a>, Defer> {
    let mut guarded = Vec::new();
    for s in steps {
        if rule.then.matches(s)? {
            guarded.push(s);
        }
    }
    if guarded.is_empty() {
        let msg = format!("no {} step", rule.then.describe);
        return Ok(Finding::new("not_applicable", msg, Vec::new()));
    }
    let mut grantable = Vec::with_capacity(steps.len());
    for a in steps {
        grantable.push(rule.before.matches(a)? && grants(rule, a)?);
    }
    let mut outcomes = Vec::with_capacity(guarded.len());
    for b in &guarded {
        outcomes.push(judge(steps, &grantable, rule, b)?);
    }
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.verdict == "fail").collect();
    if let Some(first) = failed.first() {
        // one reason code per result: the first failing step's; every failing step is evidence
        let same: Vec<&&Outcome> = failed.iter().filter(|o| o.reason == first.reason).collect();
        let evidence = same
            .iter()
            .flat_map(|o| o.evidence.iter().map(|s| s.row.span_id))
            .collect();
        let message = if first.reason.is_none() {
            let names: Vec<String> = same.iter().map(|o| label(o.evidence[0])).collect();
            format!(
                "{} ran without a preceding {}",
                names.join(", "),
                rule.before.describe
            )
        } else {
            let messages: Vec<&str> = same.iter().map(|o| o.message.as_str()).collect();
            messages.join("; ")
        };
        let mut f = Finding::new("fail", message, unique(evidence));
        f.reason = first.reason.clone();
        return Ok(f);
    }
    if let Some(first) = outcomes.iter().find(|o| o.verdict == "review") {
        let evidence = first.evidence.iter().map(|s| s.row.span_id).collect();
        let mut f = Finding::new("review", first.message.clone(), evidence);
        f.reason = first.reason.clone();
        return Ok(f);
    }
    let msg = format!(
        "all {} {} step(s) preceded as required",
        guarded.len(),
        rule.then.describe
    );
    let evidence = guarded.iter().map(|s| s.row.span_id).collect();
    Ok(Finding::new("pass", msg, evidence))
}

/// `precedes_step`: this step's own verdict under the rule (None when it is no B), what the
/// runtime guard asks of a proposed call, which an earlier failing B must not hide.
pub fn precedes_step<'a>(
    steps: &[Step<'a>],
    rule: &Precedes,
    b: &Step<'a>,
) -> Result<Option<Finding<'a>>, Defer> {
    if !rule.then.matches(b)? {
        return Ok(None);
    }
    let mut grantable = Vec::with_capacity(steps.len());
    for a in steps {
        grantable.push(rule.before.matches(a)? && grants(rule, a)?);
    }
    let o = judge(steps, &grantable, rule, b)?;
    let mut f = Finding::new(
        o.verdict,
        o.message,
        o.evidence.iter().map(|s| s.row.span_id).collect(),
    );
    f.reason = o.reason;
    Ok(Some(f))
}

/// How deep a value nests (a scalar is 0).
fn nesting(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(nesting).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_written_as_python_repr_writes_them() {
        let r = |v: Value| crate::python::repr(&v);
        assert_eq!(r(json!("C-1001")), "'C-1001'");
        assert_eq!(r(json!("it's")), "\"it's\"");
        assert_eq!(r(json!("it's \"x\"")), "'it\\'s \"x\"'");
        assert_eq!(
            r(json!("a\\b\n\x07\u{7f}\u{a0}\u{e9}\u{ad}")),
            "'a\\\\b\\n\\x07\\x7f\\xa0é\\xad'"
        );
        assert_eq!(
            r(json!({"a": [1, true, null, 1.5], "b": {}})),
            "{'a': [1, True, None, 1.5], 'b': {}}"
        );
        assert_eq!(r(json!(u64::MAX)), "18446744073709551615");
        assert_eq!(r(json!("✓")), "'✓'");
    }

    #[test]
    fn statuses_are_read_as_the_recogniser_reads_them() {
        let approvals = Approvals {
            tools: vec![Pattern::new("*approv*").unwrap()],
            shapes: vec![Shape {
                parts: vec![PathPart::Key("grant".into())],
                approved: vec![json!("YES"), json!(1)],
                denied: vec![json!(false)],
                pending: vec![json!("later")],
            }],
            defaults: true,
        };
        let s = |v: Value| status_of(&v, &approvals);
        assert_eq!(s(json!({"grant": " yes "})), Status::Approved);
        assert_eq!(s(json!({"grant": 1.0})), Status::Approved);
        assert_eq!(s(json!({"grant": true})), Status::Other);
        assert_eq!(
            s(json!({"grant": "later", "approved": true})),
            Status::Other
        );
        assert_eq!(s(json!({"grant": 0, "approved": false})), Status::Denied);
        assert_eq!(s(json!("Rejected")), Status::Denied);
        let parsed = parse_result_exact("{'grant': 1, 'n': -2.5e3}").unwrap();
        assert_eq!(parsed, json!({"grant": 1, "n": -2500.0}));
        assert!(parse_result_exact("{'n': 123456789012345678901234567890}").is_err());
    }
}
