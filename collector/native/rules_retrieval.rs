//! `retrieval` rules (`evaluators/retrieval.py`): grounding evidence of a run's answer from the
//! documents its retrieval steps returned, read from the spans' attributes as
//! `evaluators/documents.py` reads them (OpenInference's flattened documents, GenAI's list,
//! OpenLLMetry's retriever output), with the evaluator's verdicts, messages and evidence.
//!
//! What is not read here exactly as Python reads it is left to Python for that run: document
//! dates beyond the common ISO 8601 forms (`YYYY-MM-DD`, then a time `T` or ` ` `HH:MM[:SS[.f]]`
//! and `Z` or `±HH:MM`), keys with non-ASCII digits, values nested past the
//! JSON reader's depth.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};

use crate::python::{parse_float, repr};
use crate::rules_eval::{Finding, Run, Step};
use crate::rules_pack::{
    matcher, path_part, take_bool, take_count, take_number, take_str, Matcher, PathPart, Pattern,
    Refused,
};
use crate::rules_value::{at_path, python_g, Defer};
use crate::semconv::{read_json, Read};

const CLOCK_SLACK_NS: i128 = 1_000_000;
const FLAT: &str = "retrieval.documents.";
const OUTPUTS: [&str; 3] = [
    "output.value",
    "traceloop.entity.output",
    "gen_ai.task.output",
];
const SCORE_KEYS: [&str; 2] = ["score", "relevance_score"];

/// Which documents the run's user may be given.
#[derive(Debug)]
pub struct Access {
    label: Vec<PathPart>,
    allowed: Vec<String>,
    /// User id glob -> further labels, in the rule's order.
    users: Vec<(Pattern, Vec<String>)>,
    /// allow, review or deny.
    unlabeled: String,
}

/// A retrieval rule, compiled.
#[derive(Debug)]
pub struct Retrieval {
    steps: Matcher,
    before_answer: bool,
    min_documents: Option<u64>,
    min_score: Option<f64>,
    /// `max_age` in seconds, and as the message writes it.
    max_age: Option<(f64, String)>,
    age_field: String,
    age_parts: Vec<PathPart>,
    access: Option<Access>,
}

fn parts(value: Option<Value>, what: &str) -> Result<Vec<PathPart>, Refused> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .map(path_part)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Refused(format!("{what}: not a path"))),
        _ => Err(Refused(format!("{what}: not a path"))),
    }
}

fn texts(value: &Value, what: &str) -> Result<Vec<String>, Refused> {
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .ok_or_else(|| Refused(format!("{what}: not a list of text")))
}

fn access(value: Value) -> Result<Access, Refused> {
    let Value::Object(mut f) = value else {
        return Err(Refused("access: not a mapping".into()));
    };
    f.remove("label");
    let label = parts(f.remove("label_parts"), "access.label")?;
    let allowed = match f.remove("allowed") {
        None => Vec::new(),
        Some(v) => texts(&v, "access.allowed")?,
    };
    let mut users = Vec::new();
    match f.remove("users") {
        None => {}
        Some(Value::Object(map)) => {
            for (glob, labels) in map {
                users.push((Pattern::new(&glob)?, texts(&labels, "access.users")?));
            }
        }
        Some(_) => return Err(Refused("access.users: not a mapping".into())),
    }
    let unlabeled = take_str(&mut f, "unlabeled", "review")?;
    if !["allow", "review", "deny"].contains(&unlabeled.as_str()) {
        return Err(Refused(format!("access.unlabeled {unlabeled:?} unknown")));
    }
    if let Some(other) = f.keys().next() {
        return Err(Refused(format!("access.{other}: not read natively")));
    }
    Ok(Access {
        label,
        allowed,
        users,
        unlabeled,
    })
}

/// The retrieval options of a rule's native form (taken out of `fields`).
pub fn compile(fields: &mut Map<String, Value>) -> Result<Retrieval, Refused> {
    let steps = matcher(fields.remove("steps").unwrap_or(Value::Null), "steps")?;
    let before_answer = take_bool(fields, "before_answer", true)?;
    let min_documents = take_count(fields, "min_documents")?;
    let min_score = take_number(fields, "min_score")?;
    let max_age = match take_number(fields, "max_age")? {
        None => None,
        Some(seconds) => {
            let text = take_str(fields, "max_age_text", "")?;
            if text.is_empty() {
                return Err(Refused("max_age: no text for the message".into()));
            }
            Some((seconds, text))
        }
    };
    let age_field = take_str(fields, "age_field", "$.updated")?;
    let age_parts = parts(fields.remove("age_parts"), "age_field")?;
    let access = match fields.remove("access") {
        None | Some(Value::Null) => None,
        Some(v) => Some(access(v)?),
    };
    Ok(Retrieval {
        steps,
        before_answer,
        min_documents,
        min_score,
        max_age,
        age_field,
        age_parts,
        access,
    })
}

/// One document: what the rule reads of it.
struct Document {
    id: Option<String>,
    score: Option<f64>,
    metadata: Map<String, Value>,
}

/// `decoded`: JSON text (starting `{` or `[`) read as orjson reads it, other values as they are.
fn decoded(value: Option<&Value>) -> Result<Option<Value>, Defer> {
    match value {
        Some(Value::String(s)) if s.starts_with('{') || s.starts_with('[') => match read_json(s) {
            Read::Value(v) => Ok(Some(v)),
            Read::Invalid => Ok(Some(Value::String(s.clone()))),
            Read::TooDeep => Err(Defer("document JSON nested too deep")),
        },
        other => Ok(other.cloned()),
    }
}

/// `number`: bools are not numbers; text as `float()` reads it.
fn number(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => parse_float(s),
        _ => None,
    }
}

/// `str()` of a JSON value as Python holds it.
fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

fn document(fields: &HashMap<&str, Value>) -> Result<Document, Defer> {
    let metadata = match decoded(fields.get("metadata"))? {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let score = match number(fields.get("score")) {
        Some(s) => Some(s),
        None => SCORE_KEYS
            .iter()
            .find(|k| metadata.contains_key(**k))
            .and_then(|k| number(metadata.get(*k))),
    };
    let ident = match fields.get("id") {
        Some(v) => Some(v),
        None => metadata.get("id"),
    };
    let id = ident.filter(|v| !v.is_null()).map(python_str);
    Ok(Document {
        id,
        score,
        metadata,
    })
}

fn dicts(items: &[Value]) -> Vec<Map<String, Value>> {
    items
        .iter()
        .filter_map(|d| d.as_object().cloned())
        .collect()
}

/// `listed`: the documents of a `{"documents": [...]}` output or a GenAI documents list; None
/// when the span has no such list.
fn listed(attributes: &Map<String, Value>) -> Result<Option<Vec<Map<String, Value>>>, Defer> {
    if let Some(Value::Array(items)) = decoded(attributes.get("gen_ai.retrieval.documents"))? {
        return Ok(Some(dicts(&items)));
    }
    if matches!(attributes.get("retrieval.documents"), Some(Value::Array(a)) if a.is_empty()) {
        return Ok(Some(Vec::new()));
    }
    for key in OUTPUTS {
        match decoded(attributes.get(key))? {
            Some(Value::Array(items)) if items.is_empty() => return Ok(Some(Vec::new())),
            Some(Value::Object(out)) => {
                if let Some(Value::Array(items)) = out.get("documents") {
                    return Ok(Some(dicts(items)));
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

/// `FLAT.match(key)`: (the document's place, the field), for
/// `retrieval.documents.{i}.document.{id,score,content,metadata}` (`$` lets a final newline
/// through). A key Python could read with other digits is left to Python.
fn flat_key(key: &str) -> Result<Option<(u128, &str)>, Defer> {
    let Some(rest) = key.strip_prefix(FLAT) else {
        return Ok(None);
    };
    if !rest.is_ascii() {
        return Err(Defer(
            "a document key with characters Python may read as digits",
        ));
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Ok(None);
    }
    let Some(field) = rest[digits..].strip_prefix(".document.") else {
        return Ok(None);
    };
    let field = field.strip_suffix('\n').unwrap_or(field);
    if !["id", "score", "content", "metadata"].contains(&field) {
        return Ok(None);
    }
    let number = rest[..digits].trim_start_matches('0');
    if number.len() > 30 {
        return Err(Defer("a document index past 30 digits"));
    }
    Ok(Some((number.parse().unwrap_or(0), field)))
}

/// `documents_of`: the retrieval's documents in the order it returned them; [] when it
/// recorded that it found none, None when it recorded nothing about them.
fn documents(step: &Step) -> Result<Option<Vec<Document>>, Defer> {
    let attributes = step.attributes()?;
    let mut flat: BTreeMap<u128, HashMap<&str, Value>> = BTreeMap::new();
    for (key, value) in attributes {
        if let Some((i, field)) = flat_key(key)? {
            flat.entry(i).or_default().insert(field, value.clone());
        }
    }
    let listing = listed(attributes)?;
    let others = listing.as_deref().unwrap_or_default();
    if flat.is_empty() {
        return match listing {
            None => Ok(None),
            Some(ref items) => items
                .iter()
                .map(|d| document(&d.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()))
                .collect::<Result<_, _>>()
                .map(Some),
        };
    }
    let mut out = Vec::new();
    for (i, mut fields) in flat {
        if !fields.contains_key("id") {
            let other = usize::try_from(i).ok().and_then(|i| others.get(i));
            if let Some(id) = other.and_then(|o| o.get("id")) {
                fields.insert("id", id.clone());
            }
        }
        out.push(document(&fields)?);
    }
    Ok(Some(out))
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// What `datetime.fromisoformat` makes of a text: microseconds since the epoch (UTC when it
/// names no zone), Ok(None) where it raises ValueError, Err for forms left to Python.
fn iso_date(text: &str) -> Result<Option<i64>, Defer> {
    const UNKNOWN: Defer = Defer("a document date in an ISO 8601 form read only by Python");
    let b = text.as_bytes();
    if b.len() < 4 || !b[..4].iter().all(u8::is_ascii_digit) {
        return Ok(None); // the year's four digits come first in every form
    }
    let digits = |from: usize, n: usize| -> Option<i64> {
        let part = b.get(from..from + n)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, c: u8| b.get(at) == Some(&c);
    let (Some(year), true, Some(month), true, Some(day)) = (
        digits(0, 4),
        sep(4, b'-'),
        digits(5, 2),
        sep(7, b'-'),
        digits(8, 2),
    ) else {
        return Err(UNKNOWN);
    };
    let (mut hour, mut minute, mut second, mut micro, mut offset) = (0, 0, 0, 0, 0i64);
    if b.len() > 10 {
        if !(sep(10, b'T') || sep(10, b' ')) {
            return Err(UNKNOWN);
        }
        let (Some(h), true, Some(m)) = (digits(11, 2), sep(13, b':'), digits(14, 2)) else {
            return Err(UNKNOWN);
        };
        (hour, minute) = (h, m);
        let mut i = 16;
        if sep(i, b':') {
            second = digits(17, 2).ok_or(UNKNOWN)?;
            i = 19;
            if sep(i, b'.') || sep(i, b',') {
                // digits past the sixth are dropped, not rounded
                let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                if n == 0 {
                    return Err(UNKNOWN);
                }
                let kept = n.min(6);
                micro = digits(i + 1, kept).ok_or(UNKNOWN)? * 10i64.pow(6 - kept as u32);
                i += 1 + n;
            }
        }
        if sep(i, b'Z') {
            i += 1;
        } else if sep(i, b'+') || sep(i, b'-') {
            let sign = if sep(i, b'-') { -1 } else { 1 };
            let (Some(oh), true, Some(om)) = (digits(i + 1, 2), sep(i + 3, b':'), digits(i + 4, 2))
            else {
                return Err(UNKNOWN);
            };
            if oh > 23 || om > 59 {
                return Err(UNKNOWN);
            }
            offset = sign * (oh * 3600 + om * 60);
            i += 6;
        }
        if i != b.len() {
            return Err(UNKNOWN);
        }
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if year < 1
        || !(1..=12).contains(&month)
        || day < 1
        || day > month_days[(month - 1) as usize]
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Ok(None);
    }
    let seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    Ok(Some((seconds - offset) * 1_000_000 + micro))
}

/// `datetime.fromtimestamp(ns / 1e9, UTC)` in microseconds since the epoch: the float's
/// fraction rounded half to even, as CPython rounds it.
fn timestamp_micros(ns: u64) -> i64 {
    let t = ns as f64 / 1e9;
    let (int, frac) = (t.trunc(), t.fract());
    let x = frac * 1e6;
    let mut us = x.round();
    if (x - us).abs() == 0.5 {
        us = 2.0 * (x / 2.0).round();
    }
    let (mut int, mut us) = (int, us);
    if us >= 1e6 {
        us -= 1e6;
        int += 1.0;
    } else if us < 0.0 {
        us += 1e6;
        int -= 1.0;
    }
    int as i64 * 1_000_000 + us as i64
}

type Docs<'s, 'a> = [(&'s Step<'a>, Document)];
/// (a violation, what was found, evidence span ids)
type Check<'a> = (bool, Option<String>, Vec<Option<&'a str>>);

fn span_ids<'a>(docs: &[&(&Step<'a>, Document)]) -> Vec<Option<&'a str>> {
    let mut seen = HashSet::new();
    docs.iter()
        .map(|(s, _)| s.row.span_id)
        .filter(|id| seen.insert(*id))
        .collect()
}

fn count_check<'a>(rule: &Retrieval, docs: &Docs<'_, 'a>) -> Check<'a> {
    if rule.min_documents.is_none() && rule.min_score.is_none() {
        return (false, None, Vec::new());
    }
    let wanted = rule.min_documents.unwrap_or(1) as usize;
    let all: Vec<&(&Step<'a>, Document)> = docs.iter().collect();
    let mut counted = all.len();
    if let Some(min) = rule.min_score {
        let scored = all.iter().filter(|(_, d)| d.score.is_some()).count();
        if scored == 0 {
            let ids = all.iter().map(|(s, _)| s.row.span_id).collect();
            return (
                false,
                Some(format!("{} document(s) without a score", all.len())),
                ids,
            );
        }
        counted = all
            .iter()
            .filter(|(_, d)| d.score.is_some_and(|s| s >= min))
            .count();
        let unscored = all.len() - scored;
        if counted < wanted && wanted <= counted + unscored {
            let ids = all
                .iter()
                .filter(|(_, d)| d.score.is_none())
                .map(|(s, _)| s.row.span_id)
                .collect();
            return (
                false,
                Some(format!("{unscored} document(s) without a score")),
                ids,
            );
        }
    }
    if counted >= wanted {
        return (false, None, Vec::new());
    }
    let above = rule
        .min_score
        .map(|m| format!(" scoring {} or more", python_g(m)))
        .unwrap_or_default();
    (
        true,
        Some(format!("{counted} document(s){above}, fewer than {wanted}")),
        span_ids(&all),
    )
}

fn age_check<'a>(rule: &Retrieval, docs: &Docs<'_, 'a>) -> Result<Check<'a>, Defer> {
    let Some((max_age, age_text)) = &rule.max_age else {
        return Ok((false, None, Vec::new()));
    };
    let mut old = Vec::new();
    let mut undated = 0;
    for (i, entry) in docs.iter().enumerate() {
        let (s, d) = entry;
        let date = match at_path_map(&d.metadata, &rule.age_parts) {
            Some(Value::String(text)) => iso_date(text)?,
            _ => None,
        };
        let Some(date) = date else {
            undated += 1;
            continue;
        };
        let delta = i128::from(timestamp_micros(s.row.start_time_unix_nano)) - i128::from(date);
        if delta.unsigned_abs() >= 1 << 53 {
            return Err(Defer(
                "a document date too far from the retrieval to compare exactly",
            ));
        }
        if delta as f64 / 1e6 > *max_age {
            old.push((i, entry));
        }
    }
    if !old.is_empty() {
        let ids: Vec<String> = old
            .iter()
            .map(|(i, (_, d))| {
                d.id.clone()
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("#{i}"))
            })
            .collect();
        let entries: Vec<&(&Step<'a>, Document)> = old.iter().map(|(_, e)| *e).collect();
        let msg = format!(
            "{} document(s) older than {age_text}: {}",
            old.len(),
            ids.join(", ")
        );
        return Ok((true, Some(msg), span_ids(&entries)));
    }
    if undated > 0 {
        let msg = format!("{undated} document(s) without a date at {}", rule.age_field);
        return Ok((false, Some(msg), Vec::new()));
    }
    Ok((false, None, Vec::new()))
}

fn at_path_map<'v>(map: &'v Map<String, Value>, parts: &[PathPart]) -> Option<&'v Value> {
    let (first, rest) = parts.split_first()?; // `$`: the metadata itself, never text
    let PathPart::Key(key) = first else {
        return None;
    };
    at_path(map.get(key)?, rest)
}

fn access_check<'a>(run: &Run<'a>, access: Option<&Access>, docs: &Docs<'_, 'a>) -> Check<'a> {
    let Some(access) = access else {
        return (false, None, Vec::new());
    };
    let user = run.user_id.filter(|u| !u.is_empty());
    let mut permitted: HashSet<&str> = access.allowed.iter().map(String::as_str).collect();
    if let Some(user) = user {
        for (glob, labels) in &access.users {
            if glob.matches(user) {
                permitted.extend(labels.iter().map(String::as_str));
            }
        }
    }
    let mut denied: Vec<(&(&Step<'a>, Document), String)> = Vec::new();
    let mut unlabeled = Vec::new();
    for entry in docs {
        let label = if access.label.is_empty() {
            None // `$`: the label is the metadata itself
        } else {
            at_path_map(&entry.1.metadata, &access.label)
        };
        match label {
            None | Some(Value::Null) if !access.label.is_empty() => unlabeled.push(entry),
            _ => {
                let text = match label {
                    Some(v) => python_str(v),
                    None => python_str(&Value::Object(entry.1.metadata.clone())),
                };
                if !permitted.contains(text.as_str()) {
                    denied.push((entry, text));
                }
            }
        }
    }
    if access.unlabeled == "deny" {
        denied.extend(unlabeled.iter().map(|e| (*e, "no label".to_owned())));
    }
    let who = match user {
        Some(u) => format!("user {u}"),
        None => "an unknown user".to_owned(),
    };
    if !denied.is_empty() {
        let shown: Vec<String> = denied
            .iter()
            .map(|((_, d), label)| {
                let id = d.id.as_deref().filter(|i| !i.is_empty()).unwrap_or("?");
                format!("{id} ({label})")
            })
            .collect();
        let entries: Vec<&(&Step<'a>, Document)> = denied.iter().map(|(e, _)| *e).collect();
        let msg = format!(
            "{who} was given document(s) beyond their access: {}",
            shown.join(", ")
        );
        return (true, Some(msg), span_ids(&entries));
    }
    if !unlabeled.is_empty() && access.unlabeled == "review" {
        let msg = format!("{} document(s) without an access label", unlabeled.len());
        return (false, Some(msg), span_ids(&unlabeled));
    }
    (false, None, Vec::new())
}

/// `evaluate_retrieval`.
pub fn evaluate<'a>(
    run: &Run<'a>,
    steps: &[Step<'a>],
    rule: &Retrieval,
) -> Result<Finding<'a>, Defer> {
    let mut retrievals = Vec::new();
    for s in steps {
        if rule.steps.matches(s)? {
            retrievals.push(s);
        }
    }
    let answer = steps.iter().rev().find(|s| s.kind == Some("llm"));
    if let (true, Some(answer)) = (rule.before_answer, answer) {
        let start = i128::from(answer.row.start_time_unix_nano) + CLOCK_SLACK_NS;
        retrievals.retain(|s| i128::from(s.row.end_time_unix_nano) <= start);
    }
    let what = &rule.steps.describe;
    if retrievals.is_empty() && !(rule.before_answer || rule.min_documents.is_some()) {
        let msg = format!("no {what} step");
        return Ok(Finding::new("not_applicable", msg, Vec::new()));
    }
    if retrievals.is_empty() {
        let before = rule.before_answer && answer.is_some();
        let place = if before { " before the answer" } else { "" };
        let shown = match answer {
            Some(a) if before => vec![a.row.span_id],
            _ => Vec::new(),
        };
        return Ok(Finding::new(
            "fail",
            format!("no {what} step{place}"),
            shown,
        ));
    }
    let mut found = Vec::with_capacity(retrievals.len());
    for s in &retrievals {
        found.push((*s, documents(s)?));
    }
    let unknown_list = found.iter().any(|(_, listed)| listed.is_none());
    let docs: Vec<(&Step<'a>, Document)> = found
        .into_iter()
        .flat_map(|(s, listed)| listed.unwrap_or_default().into_iter().map(move |d| (s, d)))
        .collect();
    let checks = rule.min_documents.is_some()
        || rule.min_score.is_some()
        || rule.max_age.is_some()
        || rule.access.is_some();
    if docs.is_empty() && checks {
        let asked: Vec<Option<&str>> = retrievals.iter().map(|s| s.row.span_id).collect();
        let (verdict, msg, reason) = if unknown_list {
            let msg = "the retrieval recorded nothing about its documents";
            ("review", msg, Some("document_unknown"))
        } else if rule.min_documents.is_some() || rule.min_score.is_some() {
            let msg = "the retrieval returned no documents: nothing grounds the answer";
            ("fail", msg, Some("no_documents"))
        } else {
            let msg = "the retrieval returned no documents: none is stale or beyond access";
            ("pass", msg, None)
        };
        let mut f = Finding::new(verdict, msg.to_owned(), asked);
        f.reason = reason.map(str::to_owned);
        return Ok(f);
    }
    let mut failed = Vec::new();
    let mut unknown = Vec::new();
    let mut evidence = Vec::new();
    let mut seen = HashSet::new();
    for (bad, why, spans) in [
        count_check(rule, &docs),
        age_check(rule, &docs)?,
        access_check(run, rule.access.as_ref(), &docs),
    ] {
        if let Some(why) = why {
            if bad {
                failed.push(why);
            } else {
                unknown.push(why);
            }
        }
        evidence.extend(spans.into_iter().filter(|id| seen.insert(*id)));
    }
    if !failed.is_empty() {
        return Ok(Finding::new("fail", failed.join("; "), evidence));
    }
    if !unknown.is_empty() {
        let mut f = Finding::new("review", unknown.join("; "), evidence);
        f.reason = Some("document_unknown".into());
        return Ok(f);
    }
    let names: Vec<String> = retrievals
        .iter()
        .map(|s| format!("{} (seq {})", s.name(), s.row.seq))
        .collect();
    let msg = format!("{} document(s) from {}", docs.len(), names.join(", "));
    Ok(Finding::new("pass", msg, evidence))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_read_as_python_reads_them() {
        let day = 86_400 * 1_000_000i64;
        assert_eq!(iso_date("1970-01-02"), Ok(Some(day)));
        assert_eq!(
            iso_date("1970-01-02T00:00:01.5Z"),
            Ok(Some(day + 1_500_000))
        );
        assert_eq!(iso_date("1970-01-02 01:00+01:00"), Ok(Some(day)));
        assert_eq!(
            iso_date("1970-01-02T00:00:00,1234569Z"),
            Ok(Some(day + 123_456))
        );
        assert_eq!(iso_date("2024-02-30"), Ok(None));
        assert_eq!(iso_date("0000-01-01"), Ok(None));
        assert_eq!(iso_date("yesterday"), Ok(None));
        assert!(iso_date("20240101").is_err());
        assert_eq!(days_from_civil(2000, 3, 1), 11017);
    }

    #[test]
    fn timestamps_round_half_to_even() {
        assert_eq!(
            timestamp_micros(1_700_000_000_123_456_789),
            1_700_000_000_123_457
        );
    }
}
