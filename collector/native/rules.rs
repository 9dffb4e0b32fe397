//! The native rule interpreter's Python face: `compile_pack(text) -> NativePack` and
//! `NativePack.evaluate(trajectories, steps)`, which reads a round's `trajectories` and `steps`
//! batches (Arrow, as the store's tables) and gives the `results` rows of the pack's rules.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int32Builder, ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, ListArray, StringArray,
    StructArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Fields};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrow_py::{import_struct, ArrowBatch};
use crate::rules_eval::{evaluate_run, has_override, requested, Outcome, Run, StepRow};
use crate::rules_pack::{compile, Pack};

fn refused(message: String) -> PyErr {
    PyValueError::new_err(message)
}

fn column<'a, T: 'static>(batch: &'a StructArray, name: &str, what: &str) -> PyResult<&'a T> {
    let column = batch
        .column_by_name(name)
        .ok_or_else(|| refused(format!("{what} has no column {name:?}")))?;
    column.as_any().downcast_ref::<T>().ok_or_else(|| {
        refused(format!(
            "{what}.{name} is {}, not the store's type",
            column.data_type()
        ))
    })
}

fn text(a: &StringArray, i: usize) -> Option<&str> {
    a.is_valid(i).then(|| a.value(i))
}

fn int64(a: &Int64Array, i: usize) -> Option<i64> {
    a.is_valid(i).then(|| a.value(i))
}

/// The runs of a `trajectories` batch.
fn runs(batch: &StructArray) -> PyResult<Vec<Run<'_>>> {
    let w = "trajectories";
    let trace_id = column::<StringArray>(batch, "trace_id", w)?;
    let revision = column::<Int32Array>(batch, "revision", w)?;
    let status = column::<StringArray>(batch, "status", w)?;
    let reasons = column::<ListArray>(batch, "incomplete_reasons", w)?;
    let agent_run = column::<BooleanArray>(batch, "agent_run", w)?;
    let service = column::<StringArray>(batch, "service_name", w)?;
    let agent = column::<StringArray>(batch, "agent_name", w)?;
    let version = column::<StringArray>(batch, "service_version", w)?;
    let root = column::<StringArray>(batch, "root_span_id", w)?;
    let input = column::<StringArray>(batch, "input", w)?;
    let output = column::<StringArray>(batch, "final_output", w)?;
    let user = column::<StringArray>(batch, "user_id", w)?;
    let start = column::<UInt64Array>(batch, "start_time_unix_nano", w)?;
    let end = column::<UInt64Array>(batch, "end_time_unix_nano", w)?;
    let reason_values = reasons
        .values()
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| refused("trajectories.incomplete_reasons is not a list of text".into()))?;
    (0..batch.len())
        .map(|i| {
            let incomplete_reasons = if reasons.is_valid(i) {
                let offsets = reasons.value_offsets();
                (offsets[i] as usize..offsets[i + 1] as usize)
                    .map(|j| reason_values.value(j))
                    .collect()
            } else {
                Vec::new()
            };
            Ok(Run {
                trace_id: text(trace_id, i).unwrap_or(""),
                revision: revision.value(i),
                status: text(status, i),
                incomplete_reasons,
                agent_run: agent_run.is_valid(i) && agent_run.value(i),
                service_name: text(service, i),
                agent_name: text(agent, i),
                service_version: text(version, i),
                root_span_id: text(root, i),
                input: text(input, i),
                final_output: text(output, i),
                user_id: text(user, i),
                start_time_unix_nano: if start.is_valid(i) { start.value(i) } else { 0 },
                end_time_unix_nano: if end.is_valid(i) { end.value(i) } else { 0 },
            })
        })
        .collect()
}

/// The rows of a `steps` batch, with its `attributes` column (the span attributes' JSON text,
/// which the store's `steps` table does not carry).
fn step_rows(batch: &StructArray) -> PyResult<StepRows<'_>> {
    let w = "steps";
    let trace_id = column::<StringArray>(batch, "trace_id", w)?;
    let revision = column::<Int32Array>(batch, "revision", w)?;
    let seq = column::<Int32Array>(batch, "seq", w)?;
    let span_id = column::<StringArray>(batch, "span_id", w)?;
    let kind = column::<StringArray>(batch, "kind", w)?;
    let span_kind = column::<StringArray>(batch, "span_kind", w)?;
    let name = column::<StringArray>(batch, "name", w)?;
    let agent_name = column::<StringArray>(batch, "agent_name", w)?;
    let tool_name = column::<StringArray>(batch, "tool_name", w)?;
    let arguments = column::<StringArray>(batch, "arguments", w)?;
    let status = column::<StringArray>(batch, "status", w)?;
    let input_tokens = column::<Int64Array>(batch, "input_tokens", w)?;
    let output_tokens = column::<Int64Array>(batch, "output_tokens", w)?;
    let cost = column::<Float64Array>(batch, "cost_usd", w)?;
    let result = column::<StringArray>(batch, "result", w)?;
    let mcp = column::<StringArray>(batch, "mcp", w)?;
    let attributes = column::<StringArray>(batch, "attributes", w)?;
    let starts = column::<UInt64Array>(batch, "start_time_unix_nano", w)?;
    let ends = column::<UInt64Array>(batch, "end_time_unix_nano", w)?;
    let tool_call_id = column::<StringArray>(batch, "tool_call_id", w)?;
    let requested_by = column::<StringArray>(batch, "requested_by", w)?;
    let approval_status = column::<StringArray>(batch, "approval_status", w)?;
    let time = |a: &UInt64Array, i: usize| if a.is_valid(i) { a.value(i) } else { 0 };
    let keys = (0..batch.len())
        .map(|i| (text(trace_id, i).unwrap_or(""), revision.value(i)))
        .collect();
    let rows = (0..batch.len())
        .map(|i| {
            let row = StepRow {
                seq: seq.value(i),
                span_id: text(span_id, i),
                kind: text(kind, i),
                span_kind: text(span_kind, i),
                name: text(name, i),
                agent_name: text(agent_name, i),
                tool_name: text(tool_name, i),
                arguments: text(arguments, i),
                status: text(status, i),
                input_tokens: int64(input_tokens, i),
                output_tokens: int64(output_tokens, i),
                cost_usd: cost.is_valid(i).then(|| cost.value(i)),
                result: text(result, i),
                attributes: text(attributes, i),
                mcp: text(mcp, i),
                approval_override: Ok(false),
                start_time_unix_nano: time(starts, i),
                end_time_unix_nano: time(ends, i),
                tool_call_id: text(tool_call_id, i),
                requested_by: text(requested_by, i),
                approval_status: text(approval_status, i),
            };
            let row = if row.span_kind == Some("tool") || row.kind == Some("approval") {
                StepRow {
                    approval_override: has_override(text(attributes, i)),
                    ..row
                }
            } else {
                row
            };
            row
        })
        .collect::<Vec<_>>();
    Ok(StepRows { keys, rows })
}

/// A `steps` batch's rows, and the run (trace id, revision) of each.
pub struct StepRows<'a> {
    keys: Vec<(&'a str, i32)>,
    rows: Vec<StepRow<'a>>,
}

/// The `results` columns being filled, one row per rule and run.
#[derive(Default)]
struct Rows {
    trace_id: StringBuilder,
    revision: Int32Builder,
    pack: StringBuilder,
    pack_version: StringBuilder,
    rule_id: StringBuilder,
    rule_type: StringBuilder,
    verdict: StringBuilder,
    score: Float64Builder,
    severity: StringBuilder,
    reason: StringBuilder,
    message: StringBuilder,
    evidence: ListBuilder<StringBuilder>,
    requested: StringBuilder,
    service_name: StringBuilder,
    agent_name: StringBuilder,
    service_version: StringBuilder,
    deferred: StringBuilder,
    count: usize,
}

impl Rows {
    fn add(&mut self, pack: &Pack, run: &Run, outcome: &Outcome) {
        let rule = match outcome {
            Outcome::Result(rule, _) | Outcome::Deferred(rule, _) => rule,
        };
        self.trace_id.append_value(run.trace_id);
        self.revision.append_value(run.revision);
        self.pack.append_value(&pack.name);
        self.pack_version.append_value(&pack.version);
        self.rule_id.append_value(&rule.id);
        self.rule_type.append_value(&rule.rule_type);
        self.service_name.append_option(run.service_name);
        self.agent_name.append_option(run.agent_name);
        self.service_version.append_option(run.service_version);
        match outcome {
            Outcome::Result(rule, f) => {
                let (decision, reason) = requested(rule, f);
                self.verdict.append_value(f.verdict);
                self.score.append_option(f.score);
                self.severity.append_value(&rule.severity);
                self.reason.append_option(reason);
                self.message.append_value(&f.message);
                if f.evidence.is_empty() {
                    self.evidence.append_null();
                } else {
                    for e in &f.evidence {
                        self.evidence.values().append_option(*e);
                    }
                    self.evidence.append(true);
                }
                self.requested.append_option(decision);
                self.deferred.append_null();
            }
            Outcome::Deferred(_, why) => {
                self.verdict.append_null();
                self.score.append_null();
                self.severity.append_null();
                self.reason.append_null();
                self.message.append_null();
                self.evidence.append_null();
                self.requested.append_null();
                self.deferred.append_value(why);
            }
        }
        self.count += 1;
    }

    fn finish(mut self) -> StructArray {
        let text = |name: &str| Field::new(name, DataType::Utf8, true);
        let mut columns: Vec<(Field, ArrayRef)> = Vec::new();
        let mut add = |field: Field, array: ArrayRef| columns.push((field, array));
        add(text("trace_id"), Arc::new(self.trace_id.finish()));
        add(
            Field::new("revision", DataType::Int32, true),
            Arc::new(self.revision.finish()),
        );
        add(text("pack"), Arc::new(self.pack.finish()));
        add(text("pack_version"), Arc::new(self.pack_version.finish()));
        add(text("rule_id"), Arc::new(self.rule_id.finish()));
        add(text("rule_type"), Arc::new(self.rule_type.finish()));
        add(text("verdict"), Arc::new(self.verdict.finish()));
        add(
            Field::new("score", DataType::Float64, true),
            Arc::new(self.score.finish()),
        );
        add(text("severity"), Arc::new(self.severity.finish()));
        add(text("reason"), Arc::new(self.reason.finish()));
        add(text("message"), Arc::new(self.message.finish()));
        let evidence = self.evidence.finish();
        add(
            Field::new("evidence_span_ids", evidence.data_type().clone(), true),
            Arc::new(evidence),
        );
        add(
            text("requested_decision"),
            Arc::new(self.requested.finish()),
        );
        add(text("service_name"), Arc::new(self.service_name.finish()));
        add(text("agent_name"), Arc::new(self.agent_name.finish()));
        add(
            text("service_version"),
            Arc::new(self.service_version.finish()),
        );
        add(text("deferred"), Arc::new(self.deferred.finish()));
        let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns.into_iter().unzip();
        StructArray::new(Fields::from(fields), arrays, None)
    }
}

/// The packs' results over a round: runs in the batch's order, and for each run the packs in
/// the order given, each pack's rules in its own order (as a round evaluates them).
pub fn evaluate_batch(packs: &[&Pack], runs: &[Run], steps: &StepRows) -> StructArray {
    // A run's steps are one stretch of the batch (RoundRows adds them so); runs whose steps
    // are scattered are gathered.
    let mut stretches: HashMap<(&str, i32), Vec<(usize, usize)>> = HashMap::new();
    let keys = &steps.keys;
    let mut start = 0;
    for i in 1..=keys.len() {
        if i == keys.len() || keys[i] != keys[start] {
            stretches.entry(keys[start]).or_default().push((start, i));
            start = i;
        }
    }
    let mut rows = Rows::default();
    for run in runs {
        let gathered: Vec<StepRow>;
        let own: &[StepRow] = match stretches.get(&(run.trace_id, run.revision)) {
            None => &[],
            Some(parts) if parts.len() == 1 => &steps.rows[parts[0].0..parts[0].1],
            Some(parts) => {
                gathered = parts
                    .iter()
                    .flat_map(|&(a, b)| steps.rows[a..b].iter().cloned())
                    .collect();
                &gathered
            }
        };
        for pack in packs {
            for outcome in evaluate_run(pack, run, own) {
                rows.add(pack, run, &outcome);
            }
        }
    }
    rows.finish()
}

/// A compiled pack: `evaluate(trajectories, steps)` gives its native rules' results.
#[pyclass(frozen, module = "collector.normalize._native")]
pub struct NativePack {
    pack: std::sync::Arc<Pack>,
}

impl NativePack {
    pub(crate) fn pack(&self) -> &Pack {
        &self.pack
    }

    /// The pack, shared (the guard's listener keeps the packs in force).
    pub(crate) fn shared(&self) -> std::sync::Arc<Pack> {
        self.pack.clone()
    }
}

#[pymethods]
impl NativePack {
    #[getter]
    fn name(&self) -> &str {
        &self.pack.name
    }

    #[getter]
    fn version(&self) -> &str {
        &self.pack.version
    }

    /// The ids of the rules evaluated natively, in the pack's order.
    #[getter]
    fn rule_ids(&self) -> Vec<String> {
        self.pack.rules.iter().map(|r| r.id.clone()).collect()
    }

    /// (rule id, why) of the rules left to Python (a pack compiled with `partial=True`).
    #[getter]
    fn refused(&self) -> Vec<(String, String)> {
        self.pack.refused.clone()
    }

    /// The results of the pack's native rules over a round's `trajectories` and `steps`
    /// batches (the steps with an extra `attributes` column). A row whose `deferred` is set
    /// names a rule the interpreter leaves to Python for that run (and says why).
    fn evaluate(
        &self,
        py: Python<'_>,
        trajectories: &Bound<'_, PyAny>,
        steps: &Bound<'_, PyAny>,
    ) -> PyResult<ArrowBatch> {
        let trajectories = import_struct(trajectories, "trajectories")?;
        let steps = import_struct(steps, "steps")?;
        let pack = &self.pack;
        let array = py.detach(|| {
            let runs = runs(&trajectories)?;
            let rows = step_rows(&steps)?;
            Ok::<_, PyErr>(evaluate_batch(&[pack], &runs, &rows))
        })?;
        Ok(ArrowBatch::new(array))
    }
}

/// The results of several packs' native rules over one round, the round's batches read once:
/// runs in the batch's order, and each run's results pack by pack in the order given.
#[pyfunction]
pub fn evaluate_packs(
    py: Python<'_>,
    packs: Vec<PyRef<'_, NativePack>>,
    trajectories: &Bound<'_, PyAny>,
    steps: &Bound<'_, PyAny>,
) -> PyResult<ArrowBatch> {
    let trajectories = import_struct(trajectories, "trajectories")?;
    let steps = import_struct(steps, "steps")?;
    let packs: Vec<&Pack> = packs.iter().map(|p| p.pack()).collect();
    let array = py.detach(|| {
        let runs = runs(&trajectories)?;
        let rows = step_rows(&steps)?;
        Ok::<_, PyErr>(evaluate_batch(&packs, &runs, &rows))
    })?;
    Ok(ArrowBatch::new(array))
}

/// Compiles a pack's native form (JSON text, `collector/evaluation/native_rules.py`). Raises
/// ValueError naming the first rule or option not evaluated natively, unless `partial`: then
/// such rules are left out and listed in `refused`.
#[pyfunction]
#[pyo3(signature = (text, partial=false))]
pub fn compile_pack(text: &str, partial: bool) -> PyResult<NativePack> {
    let pack = compile(text, partial).map_err(|e| refused(e.0))?;
    Ok(NativePack {
        pack: std::sync::Arc::new(pack),
    })
}

/// Which of the RE2 patterns the regex crate finds in `text`, as the native secrets scan reads
/// them (the indexes, ascending): for the test that proves they mean what RE2 reads.
#[pyfunction]
pub fn regex_set_matches(patterns: Vec<String>, text: &str) -> PyResult<Vec<usize>> {
    let set = crate::rules_regex::set_of(&patterns).map_err(|e| refused(e.0))?;
    Ok(set.matches(text).into_iter().collect())
}
