//! `flow` rules (`evaluators/flow.py`): a value taken from one step's result (or the user's
//! input) reappearing in a later step's arguments, with the evaluator's verdicts, messages and
//! evidence.
//!
//! Values and arguments are compared case-folded with whitespace collapsed. Python folds with
//! `str.casefold()` over all of Unicode; here only ASCII text is folded, and a run whose compared
//! text is not ASCII is left to Python rather than folded another way.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::assemble::approvals::parse_result;
use crate::python::{write_float, FloatStyle};
use crate::rules_eval::{Finding, Run, Step};
use crate::rules_pack::{matcher, path_part, take_count, take_str, Matcher, PathPart, Refused};
use crate::rules_value::{at_path, Defer};

const NOT_ASCII: Defer = Defer("text that is not ASCII in a flow (Python case-folds it)");

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

/// Python's `str.isspace()` on ASCII (the separators 0x1c-0x1f are space to it).
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f)
}

/// Not part of a word: `WORD`'s excluded characters.
fn breaks_word(b: u8) -> bool {
    space(b) || b"\"'`,;()<>[]{}=&|".contains(&b)
}

/// `normal`: whitespace runs made one space, stripped, case-folded (ASCII text only).
fn normal(text: &str) -> Result<String, Defer> {
    if !text.is_ascii() {
        return Err(NOT_ASCII);
    }
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for b in text.bytes() {
        if space(b) {
            gap = true;
        } else {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push(b.to_ascii_lowercase() as char);
        }
    }
    Ok(out)
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

/// `values_of`: each leaf, and each word of a leaf, long enough to count, longest first.
fn values_of(value: &Value, min_length: usize) -> Result<Vec<String>, Defer> {
    let mut texts = Vec::new();
    leaves(value, &mut texts);
    let mut found: HashSet<String> = HashSet::new();
    for leaf in &texts {
        if !leaf.is_ascii() {
            return Err(NOT_ASCII);
        }
        let bytes = leaf.as_bytes();
        let mut candidates = vec![leaf.as_str()];
        let mut i = 0;
        while i < bytes.len() {
            if breaks_word(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && !breaks_word(bytes[i]) {
                i += 1;
            }
            candidates.push(&leaf[start..i]);
        }
        for text in candidates {
            let text = normal(text)?;
            let text = text.trim_matches(|c| ".:!?".contains(c));
            if text.len() >= min_length {
                found.insert(text.to_owned());
            }
        }
    }
    let mut values: Vec<String> = found.into_iter().collect();
    values.sort_unstable_by_key(|v| std::cmp::Reverse(v.len()));
    Ok(values)
}

/// A source: its step (None for the input) and its values, longest first.
type Given<'s, 'a> = (Option<&'s Step<'a>>, Vec<String>);

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
                values_of(&Value::String(input.to_owned()), flow.min_length)?,
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
        let parsed = parse_result(result).map_err(|_| Defer("a tool result Python reads"))?;
        let narrowed = match &source.path {
            None => Some(&parsed),
            Some(parts) => at_path(&parsed, parts),
        };
        let values = values_of(narrowed.unwrap_or(&Value::Null), flow.min_length)?;
        out.push((Some(s), values));
    }
    Ok(out)
}

/// The length of the longest source value found inside one of the sink's argument texts.
fn flows(values: &[String], texts: &[String]) -> Option<usize> {
    values
        .iter()
        .find(|v| texts.iter().any(|t| t.contains(v.as_str())))
        .map(String::len)
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
                texts = Some(
                    leaves_of
                        .iter()
                        .map(|l| normal(l))
                        .collect::<Result<_, _>>()?,
                );
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
        let values = values_of(
            &json!({"a": "KEY=Sekrit123 end.", "b": [12345678, 1e16]}),
            5,
        );
        let mut values = values.unwrap();
        values.sort();
        assert_eq!(
            values,
            ["12345678", "1e+16", "key=sekrit123 end", "sekrit123"]
        );
        assert_eq!(values_of(&json!("é"), 2), Err(NOT_ASCII));
    }

    #[test]
    fn whitespace_is_collapsed_and_stripped() {
        assert_eq!(normal("  A\x1c\tB  ").unwrap(), "a b");
    }
}
