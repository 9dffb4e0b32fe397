//! `flow` rules (`evaluators/flow.py`): a value taken from one step's result (or the user's
//! input) reappearing in a later step's arguments, with the evaluator's verdicts, messages and
//! evidence.
//!
//! Values and arguments are compared as Python compares them: whitespace (`str.isspace()`)
//! collapsed, `str.casefold()`ed (rules_casefold.rs, Python's own table), lengths in characters.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::assemble::approvals::parse_result_exact;
use crate::python::{write_float, FloatStyle};
use crate::rules_casefold::folded;
use crate::rules_eval::{Finding, Run, Step};
use crate::rules_pack::{matcher, path_part, take_count, take_str, Matcher, PathPart, Refused};
use crate::rules_value::{at_path, Defer};

/// A flow rule, compiled.
#[derive(Debug)]
pub struct Flow {
    /// None: the user's input is the source.
    source: Option<Source>,
    sink: Matcher,
    min_length: usize,
    /// `expect: present`: a sink without a value from the source fails.
    present: bool,
}

#[derive(Debug)]
struct Source {
    step: Matcher,
    /// `result_path`, split: only the value there gives values.
    path: Option<Vec<PathPart>>,
}

/// The flow options of a rule's native form (taken out of `fields`).
pub fn compile(fields: &mut Map<String, Value>) -> Result<Flow, Refused> {
    let source = match fields.remove("source") {
        Some(Value::String(s)) if s == "input" => None,
        Some(Value::Object(mut m)) => {
            m.remove("result_path");
            let path = match m.remove("result_parts") {
                None => None,
                Some(Value::Array(parts)) => Some(
                    parts
                        .iter()
                        .map(path_part)
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| Refused("source.result_path: not a path".into()))?,
                ),
                Some(_) => return Err(Refused("source.result_path: not a path".into())),
            };
            Some(Source {
                step: matcher(Value::Object(m), "source")?,
                path,
            })
        }
        _ => return Err(Refused("source: not a step matcher or `input`".into())),
    };
    let sink = matcher(fields.remove("sink").unwrap_or(Value::Null), "sink")?;
    let min_length = take_count(fields, "min_length")?.unwrap_or(6) as usize;
    let present = match take_str(fields, "expect", "absent")?.as_str() {
        "absent" => false,
        "present" => true,
        other => return Err(Refused(format!("expect {other:?} unknown"))),
    };
    Ok(Flow {
        source,
        sink,
        min_length,
        present,
    })
}

/// Python's `str.isspace()` (and `re`'s `\s`): Unicode's White_Space and the separators
/// 0x1c-0x1f.
fn space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Not part of a word: `WORD`'s excluded characters.
fn breaks_word(c: char) -> bool {
    space(c) || "\"'`,;()<>[]{}=&|".contains(c)
}

/// `normal`: whitespace runs made one space, stripped, case-folded.
fn normal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if space(c) {
            gap = true;
            continue;
        }
        if gap && !out.is_empty() {
            out.push(' ');
        }
        gap = false;
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            match folded(c) {
                Some(f) => out.push_str(f),
                None => out.push(c),
            }
        }
    }
    out
}

/// `leaves`: the text of every leaf of a value (numbers as Python's `str()` writes them).
fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Null | Value::Bool(_) => {}
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(if let Some(i) = n.as_i64() {
            i.to_string()
        } else if let Some(u) = n.as_u64() {
            u.to_string()
        } else {
            let mut text = String::new();
            write_float(
                n.as_f64().unwrap_or(f64::NAN),
                FloatStyle::Python,
                &mut text,
            );
            text
        }),
    }
}

/// `values_of`: each leaf, and each word of a leaf, long enough to count, longest first (the
/// length in characters beside each).
fn values_of(value: &Value, min_length: usize) -> Vec<(String, usize)> {
    let mut texts = Vec::new();
    leaves(value, &mut texts);
    let mut found: HashSet<String> = HashSet::new();
    for leaf in &texts {
        let mut candidates = vec![leaf.as_str()];
        let mut start = None;
        for (i, c) in leaf.char_indices() {
            match (breaks_word(c), start) {
                (true, Some(s)) => {
                    candidates.push(&leaf[s..i]);
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = start {
            candidates.push(&leaf[s..]);
        }
        for text in candidates {
            let text = normal(text);
            let text = text.trim_matches(|c| ".:!?".contains(c));
            if text.chars().count() >= min_length {
                found.insert(text.to_owned());
            }
        }
    }
    let mut values: Vec<(String, usize)> = found
        .into_iter()
        .map(|v| {
            let n = v.chars().count();
            (v, n)
        })
        .collect();
    values.sort_unstable_by_key(|(_, n)| std::cmp::Reverse(*n));
    values
}

/// A source: its step (None for the input) and its values, longest first.
type Given<'s, 'a> = (Option<&'s Step<'a>>, Vec<(String, usize)>);

/// `sources`: (the source step, or None for the input; its values), in run order.
fn sources<'s, 'a>(
    run: &Run<'a>,
    steps: &'s [Step<'a>],
    flow: &Flow,
) -> Result<Vec<Given<'s, 'a>>, Defer> {
    let Some(source) = &flow.source else {
        return Ok(match run.input.filter(|i| !i.is_empty()) {
            Some(input) => vec![(
                None,
                values_of(&Value::String(input.to_owned()), flow.min_length),
            )],
            None => Vec::new(),
        });
    };
    let mut out = Vec::new();
    for s in steps {
        let Some(result) = s.row.result else { continue };
        if !source.step.matches(s)? {
            continue;
        }
        let parsed = parse_result_exact(result)
            .map_err(|_| Defer("a tool result only Python reads (a literal, deep JSON)"))?;
        let narrowed = match &source.path {
            None => Some(&parsed),
            Some(parts) => at_path(&parsed, parts),
        };
        let values = values_of(narrowed.unwrap_or(&Value::Null), flow.min_length);
        out.push((Some(s), values));
    }
    Ok(out)
}

/// The length of the longest source value found inside one of the sink's argument texts.
fn flows(values: &[(String, usize)], texts: &[String]) -> Option<usize> {
    values
        .iter()
        .find(|(v, _)| texts.iter().any(|t| t.contains(v.as_str())))
        .map(|(_, n)| *n)
}

fn evidence<'a>(src: Option<&Step<'a>>, sink: &Step<'a>) -> Vec<Option<&'a str>> {
    src.map(|s| s.row.span_id)
        .into_iter()
        .chain([sink.row.span_id])
        .collect()
}

/// `evaluate_flow`.
pub fn evaluate<'a>(run: &Run<'a>, steps: &[Step<'a>], flow: &Flow) -> Result<Finding<'a>, Defer> {
    let given = sources(run, steps, flow)?;
    let mut sinks = Vec::new();
    for s in steps {
        if flow.sink.matches(s)? {
            sinks.push(s);
        }
    }
    let mut found: Vec<(Option<&Step<'a>>, &Step<'a>, usize)> = Vec::new();
    let mut unfed: Vec<&Step<'a>> = Vec::new();
    for sink in &sinks {
        let mut texts: Option<Vec<String>> = None;
        let mut hit = None;
        for (src, values) in &given {
            if src.is_some_and(|s| s.row.seq >= sink.row.seq) {
                continue;
            }
            if texts.is_none() {
                let mut leaves_of = Vec::new();
                leaves(sink.arguments()?, &mut leaves_of);
                texts = Some(leaves_of.iter().map(|l| normal(l)).collect());
            }
            if let Some(length) = flows(values, texts.as_deref().unwrap_or_default()) {
                hit = Some((*src, *sink, length));
                break;
            }
        }
        match hit {
            Some(h) => found.push(h),
            None => unfed.push(sink),
        }
    }
    if !flow.present {
        let Some(&(src, sink, length)) = found.first() else {
            let msg = format!("no value of the source reached {} sink(s)", sinks.len());
            return Ok(Finding::new("pass", msg, Vec::new()));
        };
        let place = match src {
            None => "the user's input".to_owned(),
            Some(s) => format!("{} (seq {})", s.name(), s.row.seq),
        };
        let more = if found.len() > 1 {
            format!("; {} more flow(s)", found.len() - 1)
        } else {
            String::new()
        };
        let msg = format!(
            "a value of {length} characters from {place} reached {} (seq {}){more}",
            sink.name(),
            sink.row.seq
        );
        return Ok(Finding::new("fail", msg, evidence(src, sink)));
    }
    if sinks.is_empty() {
        let msg = "no sink step in the run".to_owned();
        return Ok(Finding::new("not_applicable", msg, Vec::new()));
    }
    if !unfed.is_empty() && run.status == Some("incomplete") {
        let msg = format!(
            "trace incomplete ({}); a sink got no value",
            run.incomplete_reasons.join(", ")
        );
        let mut f = Finding::new("review", msg, Vec::new());
        f.reason = Some("trace_incomplete".into());
        return Ok(f);
    }
    if let Some(first) = unfed.first() {
        let msg = format!(
            "{} (seq {}) got no value from the source",
            first.name(),
            first.row.seq
        );
        let ids = unfed.iter().map(|s| s.row.span_id).collect();
        return Ok(Finding::new("fail", msg, ids));
    }
    let (src, sink, _) = found[0];
    let msg = format!("every sink got a value from the source ({})", found.len());
    Ok(Finding::new("pass", msg, evidence(src, sink)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_leaves_and_their_words() {
        let value = json!({"a": "KEY=Sekrit123 end.", "b": [12345678, 1e16]});
        let mut values: Vec<String> = values_of(&value, 5).into_iter().map(|v| v.0).collect();
        values.sort();
        assert_eq!(
            values,
            ["12345678", "1e+16", "key=sekrit123 end", "sekrit123"]
        );
        assert_eq!(values_of(&json!("Straße"), 7), [("strasse".to_owned(), 7)]);
    }

    #[test]
    fn whitespace_is_collapsed_and_stripped() {
        assert_eq!(normal("\u{3000} A\x1c\tB\u{85} "), "a b");
    }
}
