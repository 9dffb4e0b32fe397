//! The assembler's round built natively: a round's stored spans (the `spans` batch columns the
//! Python builder reads) to the `trajectories` and `steps` tables, value for value what
//! `build_batch` (collector/assembler/work.py) stores when no evaluator runs. The Python
//! builder stays the specification; tests/unit/assembler/test_native_build.py holds the two
//! equal on every capture and on generated rounds.
//!
//! What this builder does not read as Python does (JSON nested past 128 levels in attributes,
//! rare Python literal forms in an approval's result, ...) is refused with `Unsupported`
//! naming the trace, never built differently.

pub(crate) mod approvals;
mod mcp;
pub(crate) mod messages;
mod output;
mod span;
mod step_attributes;
mod trajectory;

use std::cell::RefCell;
use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType, UInt32Type, UInt64Type};
use arrow_array::{Array, StructArray};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::arrow_py::{import_struct, ArrowBatch};
pub(crate) use output::encoded;
pub(crate) use span::{Row, SpanMemo};
pub(crate) use trajectory::{build_trajectory, Trajectory};

create_exception!(
    _native,
    Unsupported,
    PyException,
    "A round holds something the native builder does not read as the Python builder does."
);

/// Why a trace was not built: something this builder leaves to Python (the whole round is
/// refused), or an error the Python builder raises too (the trace is stored as a build error
/// with this text).
#[derive(Debug)]
pub enum Fail {
    Unsupported(String),
    Build(String),
}

impl Fail {
    pub fn unsupported(why: impl Into<String>) -> Self {
        Fail::Unsupported(why.into())
    }
}

/// Token prices, longest prefix first (collector/assembler/prices.py `PriceTable`).
pub struct Prices {
    prefixes: Vec<(String, f64, f64)>,
    cache: RefCell<HashMap<String, Option<(f64, f64)>>>,
}

impl Prices {
    /// `prefixes` in the table's lookup order.
    pub fn new(prefixes: Vec<(String, f64, f64)>) -> Self {
        Self {
            prefixes: prefixes
                .into_iter()
                .map(|(p, i, o)| (p.to_lowercase(), i, o))
                .collect(),
            cache: RefCell::new(HashMap::new()),
        }
    }

    fn price(&self, model: &str) -> Option<(f64, f64)> {
        if let Some(found) = self.cache.borrow().get(model) {
            return *found;
        }
        let key = model.to_lowercase();
        let found = self
            .prefixes
            .iter()
            .find(|(p, _, _)| key.starts_with(p.as_str()))
            .map(|&(_, i, o)| (i, o));
        self.cache.borrow_mut().insert(model.to_owned(), found);
        found
    }

    pub fn cost(
        &self,
        model: Option<&str>,
        input: Option<i64>,
        output: Option<i64>,
    ) -> Option<f64> {
        let price = self.price(model.filter(|m| !m.is_empty())?)?;
        if input.is_none() && output.is_none() {
            return None;
        }
        Some(
            (input.unwrap_or(0) as f64 * price.0 + output.unwrap_or(0) as f64 * price.1)
                / 1_000_000.0,
        )
    }
}

/// A trace to close: its id, why, its new revision, and up to when (µs) the previous
/// revision saw spans.
pub struct Closing {
    pub trace_id: String,
    pub reason: String,
    pub revision: i64,
    pub covered: Option<i64>,
}

/// The round's tables and the build errors (`trace id: error`), as `build_batch` has them;
/// with the steps' span attributes when asked (`step_attributes`).
pub struct Round {
    pub trajectories: StructArray,
    pub steps: StructArray,
    pub build_errors: Vec<String>,
    pub attributes: Option<StructArray>,
}

pub(crate) fn strs<'a>(batch: &'a StructArray, name: &str) -> Result<Vec<Option<&'a str>>, String> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| format!("the spans have no column {name}"))?;
    let col = col
        .as_string_opt::<i32>()
        .ok_or_else(|| format!("column {name} is not utf8"))?;
    Ok((0..col.len())
        .map(|i| (!col.is_null(i)).then(|| col.value(i)))
        .collect())
}

pub(crate) fn prims<T: arrow_array::ArrowPrimitiveType>(
    batch: &StructArray,
    name: &str,
) -> Result<Vec<Option<T::Native>>, String> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| format!("the spans have no column {name}"))?;
    let col = col
        .as_primitive_opt::<T>()
        .ok_or_else(|| format!("column {name} is not {}", T::DATA_TYPE))?;
    Ok((0..col.len())
        .map(|i| (!col.is_null(i)).then(|| col.value(i)))
        .collect())
}

fn required<T: Copy>(values: Vec<Option<T>>, name: &str) -> Result<Vec<T>, String> {
    values
        .into_iter()
        .map(|v| v.ok_or_else(|| format!("a span has no {name}")))
        .collect()
}

/// The rows of a `spans` batch (the columns of collector/assembler/spans.py SPAN_FIELDS and
/// `received_at`).
fn rows_of(batch: &StructArray) -> Result<Vec<Row<'_>>, String> {
    let trace_id = required(strs(batch, "trace_id")?, "trace_id")?;
    let span_id = required(strs(batch, "span_id")?, "span_id")?;
    let parent = strs(batch, "parent_span_id")?;
    let flags = prims::<UInt32Type>(batch, "flags")?;
    let name = strs(batch, "name")?;
    let kind = strs(batch, "kind")?;
    let scope = strs(batch, "scope_name")?;
    let start = required(
        prims::<UInt64Type>(batch, "start_time_unix_nano")?,
        "start time",
    )?;
    let end = required(
        prims::<UInt64Type>(batch, "end_time_unix_nano")?,
        "end time",
    )?;
    let status = strs(batch, "status_code")?;
    let step_kind = strs(batch, "step_kind")?;
    let tool_name = strs(batch, "tool_name")?;
    let tool_call_id = strs(batch, "tool_call_id")?;
    let tool_arguments = strs(batch, "tool_arguments")?;
    let tool_result = strs(batch, "tool_result")?;
    let model = strs(batch, "model")?;
    let input_tokens = prims::<Int64Type>(batch, "input_tokens")?;
    let output_tokens = prims::<Int64Type>(batch, "output_tokens")?;
    let agent_name = strs(batch, "agent_name")?;
    let conversation_id = strs(batch, "conversation_id")?;
    let user_id = strs(batch, "user_id")?;
    let error_type = strs(batch, "error_type")?;
    let service_name = strs(batch, "service_name")?;
    let service_version = strs(batch, "service_version")?;
    let attributes = strs(batch, "attributes")?;
    let events = strs(batch, "events")?;
    let received = required(
        prims::<TimestampMicrosecondType>(batch, "received_at")?,
        "received_at",
    )?;
    Ok((0..batch.len())
        .map(|i| Row {
            trace_id: trace_id[i],
            span_id: span_id[i],
            parent_span_id: parent[i],
            flags: flags[i],
            name: name[i],
            kind: kind[i],
            scope_name: scope[i],
            start: start[i],
            end: end[i],
            status_code: status[i],
            step_kind: step_kind[i],
            tool_name: tool_name[i],
            tool_call_id: tool_call_id[i],
            tool_arguments: tool_arguments[i],
            tool_result: tool_result[i],
            model: model[i],
            input_tokens: input_tokens[i],
            output_tokens: output_tokens[i],
            agent_name: agent_name[i],
            conversation_id: conversation_id[i],
            user_id: user_id[i],
            error_type: error_type[i],
            service_name: service_name[i],
            service_version: service_version[i],
            attributes: attributes[i],
            events: events[i],
            received_at: received[i],
            memo: None,
        })
        .collect())
}

/// The round built: Err names what this builder refused (the caller builds the round in
/// Python instead). With `attributes`, the steps' span attributes too.
pub fn build_round(
    spans: &[StructArray],
    closing: &[Closing],
    prices: &Prices,
    closed_at: i64,
    attributes: bool,
) -> Result<Round, String> {
    let mut rows = Vec::new();
    for batch in spans {
        rows.extend(rows_of(batch)?);
    }
    let mut by_trace: HashMap<&str, Vec<&Row>> = HashMap::new();
    for row in &rows {
        by_trace.entry(row.trace_id).or_default().push(row);
    }
    let mut out = output::Tables::new(closed_at);
    let mut step_attributes = step_attributes::StepAttributes::new(attributes, &rows);
    let mut build_errors = Vec::new();
    for item in closing {
        let Some(span_rows) = by_trace.get(item.trace_id.as_str()) else {
            continue; // nothing stored under this id any more
        };
        let revision = i32::try_from(item.revision)
            .map_err(|_| format!("trace {}: revision out of range", item.trace_id))?;
        let late = item.covered.map_or(0, |c| {
            span_rows.iter().filter(|r| r.received_at > c).count()
        });
        let received = (
            span_rows.iter().map(|r| r.received_at).min().unwrap_or(0),
            span_rows.iter().map(|r| r.received_at).max().unwrap_or(0),
        );
        let built = trajectory::build_trajectory(
            &item.trace_id,
            span_rows,
            prices,
            revision,
            &item.reason,
            late,
        )
        .and_then(|t| output::encoded(&t).map(|json| (t, json)));
        match built {
            Ok((t, json)) => {
                out.add(&t, received, json, None);
                step_attributes.add(&t.steps, span_rows);
            }
            Err(Fail::Build(error)) => {
                build_errors.push(format!("{}: {error}", item.trace_id));
                out.add_unbuildable(item, revision, span_rows, late, received, &error);
            }
            Err(Fail::Unsupported(why)) => return Err(format!("trace {}: {why}", item.trace_id)),
        }
    }
    let (trajectories, steps) = out.finish()?;
    Ok(Round {
        trajectories,
        steps,
        build_errors,
        attributes: step_attributes.finish(),
    })
}

type BuildResult = (ArrowBatch, ArrowBatch, Vec<String>, Option<ArrowBatch>);

/// `build_round(spans, closing, prices, closed_at, attributes=False)`: the round's
/// `trajectories` and `steps` tables (as `__arrow_c_array__` objects), its build errors, and
/// with `attributes` the steps' span attributes as JSON text (a one-column batch, row for row
/// beside `steps`; else None). `spans` is a list of RecordBatches of the `spans` columns the
/// builder reads, `closing` a list of `(trace_id, reason, revision, covered_until_µs | None)`,
/// `prices` the price table's `(prefix, input, output)` in lookup order, `closed_at` µs since
/// the epoch. Raises
/// `Unsupported` for a round it does not build as the Python builder would.
#[pyfunction]
#[pyo3(name = "build_round", signature = (spans, closing, prices, closed_at, attributes=false))]
fn py_build_round(
    py: Python<'_>,
    spans: Vec<Bound<'_, PyAny>>,
    closing: Vec<(String, String, i64, Option<i64>)>,
    prices: Vec<(String, f64, f64)>,
    closed_at: i64,
    attributes: bool,
) -> PyResult<BuildResult> {
    let batches = spans
        .iter()
        .map(|batch| import_struct(batch, "spans"))
        .collect::<PyResult<Vec<_>>>()?;
    let closing: Vec<Closing> = closing
        .into_iter()
        .map(|(trace_id, reason, revision, covered)| Closing {
            trace_id,
            reason,
            revision,
            covered,
        })
        .collect();
    let round = py.detach(move || {
        let prices = Prices::new(prices);
        build_round(&batches, &closing, &prices, closed_at, attributes)
    });
    let round = round.map_err(Unsupported::new_err)?;
    Ok((
        ArrowBatch::new(round.trajectories),
        ArrowBatch::new(round.steps),
        round.build_errors,
        round.attributes.map(ArrowBatch::new),
    ))
}

/// Registers `build_round` and `Unsupported` in the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_build_round, m)?)?;
    m.add("Unsupported", m.py().get_type::<Unsupported>())?;
    Ok(())
}
