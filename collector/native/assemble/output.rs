//! A round's trajectories as the `trajectories` and `steps` tables of the store's batch schema
//! (collector/assembler/records.py `RoundRows` with no evaluator: no verdict columns).

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMicrosecondBuilder, UInt64Builder,
};
use arrow_array::{ArrayRef, StructArray};
use arrow_schema::{DataType, Field, Fields, TimeUnit};

use crate::json::{write_map, write_value};

use super::span::Row;
use super::trajectory::{value_depth, Trajectory};
use super::{Closing, Fail};

/// orjson's nesting limit when it writes: deeper values raise.
const WRITE_DEPTH: usize = 254;

/// One step's `arguments` and `mcp` as JSON text.
pub type StepJson = (Option<String>, Option<String>);

/// The steps' `arguments` and `mcp` columns as JSON text; what cannot be written (nested past
/// orjson's limit) is the trace's build error, as `step_json` raises it.
pub fn encoded(t: &Trajectory) -> Result<Vec<StepJson>, Fail> {
    t.steps
        .iter()
        .map(|s| {
            let arguments = match &s.arguments {
                None => None,
                Some(v) => {
                    if s.deep_arguments && value_depth(v) > WRITE_DEPTH {
                        return Err(Fail::Build("TypeError: Recursion limit reached".into()));
                    }
                    let mut out = Vec::new();
                    write_value(&mut out, v);
                    Some(String::from_utf8(out).expect("JSON of UTF-8 strings is UTF-8"))
                }
            };
            let mcp = s.mcp.as_ref().map(|m| {
                let mut out = Vec::new();
                write_map(&mut out, m);
                String::from_utf8(out).expect("JSON of UTF-8 strings is UTF-8")
            });
            Ok((arguments, mcp))
        })
        .collect()
}

fn list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, None)
}

#[derive(Default)]
struct TrajectoryColumns {
    trace_id: StringBuilder,
    revision: Int32Builder,
    is_current: BooleanBuilder,
    status: StringBuilder,
    close_reason: StringBuilder,
    incomplete_reasons: ListBuilder<StringBuilder>,
    agent_run: BooleanBuilder,
    service_name: StringBuilder,
    agent_name: StringBuilder,
    service_version: StringBuilder,
    root_span_id: StringBuilder,
    root_name: StringBuilder,
    case_id: StringBuilder,
    conversation_id: StringBuilder,
    user_id: StringBuilder,
    input: StringBuilder,
    final_output: StringBuilder,
    steps: Int32Builder,
    tool_calls: Int32Builder,
    llm_calls: Int32Builder,
    input_tokens: Int64Builder,
    output_tokens: Int64Builder,
    cost_usd: Float64Builder,
    unpriced_llm_calls: Int32Builder,
    error_count: Int32Builder,
    span_count: Int32Builder,
    late_spans: Int32Builder,
    start: UInt64Builder,
    end: UInt64Builder,
    first_received_at: TimestampMicrosecondBuilder,
    last_received_at: TimestampMicrosecondBuilder,
    closed_at: TimestampMicrosecondBuilder,
    verdict: StringBuilder,
    verdict_reasons: ListBuilder<StringBuilder>,
    build_error: StringBuilder,
    unrepresentable: StringBuilder,
    verdict_rules: ListBuilder<StringBuilder>,
}

#[derive(Default)]
struct StepColumns {
    trace_id: StringBuilder,
    revision: Int32Builder,
    seq: Int32Builder,
    span_id: StringBuilder,
    parent_span_id: StringBuilder,
    depth: Int32Builder,
    kind: StringBuilder,
    span_kind: StringBuilder,
    name: StringBuilder,
    agent_name: StringBuilder,
    tool_name: StringBuilder,
    tool_call_id: StringBuilder,
    arguments: StringBuilder,
    result: StringBuilder,
    status: StringBuilder,
    error_type: StringBuilder,
    model: StringBuilder,
    input_tokens: Int64Builder,
    output_tokens: Int64Builder,
    cost_usd: Float64Builder,
    approval_status: StringBuilder,
    policy_name: StringBuilder,
    policy_decision: StringBuilder,
    state_target: StringBuilder,
    start: UInt64Builder,
    end: UInt64Builder,
    mcp: StringBuilder,
    requested_by: StringBuilder,
}

/// The round's columns, filled as trajectories are added.
pub struct Tables {
    closed_at: i64,
    t: TrajectoryColumns,
    s: StepColumns,
}

/// A total as its column holds it: None (and its text kept) past int64.
fn total(value: i128) -> Option<i64> {
    i64::try_from(value).ok()
}

impl Tables {
    pub fn new(closed_at: i64) -> Self {
        Self {
            closed_at,
            t: TrajectoryColumns::default(),
            s: StepColumns::default(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add_row(
        &mut self,
        t: &Trajectory,
        received: (i64, i64),
        totals: [i128; 2],
        counts: [usize; 5],
        cost: Option<f64>,
        build_error: Option<&str>,
    ) {
        let c = &mut self.t;
        c.trace_id.append_value(&t.trace_id);
        c.revision.append_value(t.revision);
        c.is_current.append_value(true);
        c.status.append_value(t.status);
        c.close_reason.append_value(&t.close_reason);
        if t.incomplete_reasons.is_empty() {
            c.incomplete_reasons.append_null();
        } else {
            for r in &t.incomplete_reasons {
                c.incomplete_reasons.values().append_value(r);
            }
            c.incomplete_reasons.append(true);
        }
        c.agent_run.append_value(t.agent_run);
        c.service_name.append_option(t.service_name.as_deref());
        c.agent_name.append_option(t.agent_name.as_deref());
        c.service_version
            .append_option(t.service_version.as_deref());
        c.root_span_id.append_option(t.root_span_id.as_deref());
        c.root_name.append_option(t.root_name.as_deref());
        c.case_id.append_option(t.case_id.as_deref());
        c.conversation_id
            .append_option(t.conversation_id.as_deref());
        c.user_id.append_option(t.user_id.as_deref());
        c.input.append_option(t.input.as_deref());
        c.final_output.append_option(t.final_output.as_deref());
        let [steps, tool_calls, llm_calls, unpriced, errors] = counts;
        for (b, n) in [
            (&mut c.steps, steps),
            (&mut c.tool_calls, tool_calls),
            (&mut c.llm_calls, llm_calls),
        ] {
            b.append_value(n as i32);
        }
        let mut kept = Vec::new();
        for (b, name, value) in [
            (&mut c.input_tokens, "input_tokens", totals[0]),
            (&mut c.output_tokens, "output_tokens", totals[1]),
        ] {
            let v = total(value);
            if v.is_none() {
                kept.push((name, value.to_string()));
            }
            b.append_option(v);
        }
        c.cost_usd.append_option(cost);
        c.unpriced_llm_calls.append_value(unpriced as i32);
        c.error_count.append_value(errors as i32);
        c.span_count.append_value(t.span_count as i32);
        c.late_spans.append_value(t.late_spans as i32);
        c.start.append_value(t.start);
        c.end.append_value(t.end);
        c.first_received_at.append_value(received.0);
        c.last_received_at.append_value(received.1);
        c.closed_at.append_value(self.closed_at);
        c.verdict.append_null();
        c.verdict_reasons.append_null();
        c.build_error.append_option(build_error);
        if kept.is_empty() {
            c.unrepresentable.append_null();
        } else {
            let mut out = String::from("{");
            for (i, (name, text)) in kept.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!("\"{name}\":\"{text}\""));
            }
            out.push('}');
            c.unrepresentable.append_value(out);
        }
        c.verdict_rules.append_null();
    }

    /// A built trajectory, its steps' JSON columns `json` (from `encoded`).
    pub fn add(
        &mut self,
        t: &Trajectory,
        received: (i64, i64),
        json: Vec<StepJson>,
        build_error: Option<&str>,
    ) {
        let steps = &t.steps;
        let llm = |k: &Option<String>| k.as_deref() == Some("llm");
        let mut totals = [0i128; 2];
        let mut cost: Option<f64> = None;
        let mut unpriced = 0;
        for s in steps.iter().filter(|s| llm(&s.kind)) {
            totals[0] += i128::from(s.input_tokens.unwrap_or(0));
            totals[1] += i128::from(s.output_tokens.unwrap_or(0));
            match s.cost_usd {
                Some(c) => cost = Some(cost.unwrap_or(0.0) + c),
                None => unpriced += 1,
            }
        }
        let counts = [
            steps.len(),
            steps.iter().filter(|s| s.is_tool_call()).count(),
            steps.iter().filter(|s| llm(&s.kind)).count(),
            unpriced,
            steps.iter().filter(|s| s.error).count(),
        ];
        self.add_row(t, received, totals, counts, cost, build_error);
        let c = &mut self.s;
        for (s, (arguments, mcp)) in steps.iter().zip(json) {
            c.trace_id.append_value(&t.trace_id);
            c.revision.append_value(t.revision);
            c.seq.append_value(s.seq);
            c.span_id.append_value(&s.span_id);
            c.parent_span_id.append_option(s.parent_span_id.as_deref());
            c.depth.append_value(s.depth);
            c.kind.append_option(s.kind.as_deref());
            c.span_kind.append_option(s.span_kind.as_deref());
            c.name.append_value(&s.name);
            c.agent_name.append_option(s.agent_name.as_deref());
            c.tool_name.append_option(s.tool_name.as_deref());
            c.tool_call_id.append_option(s.tool_call_id.as_deref());
            c.arguments.append_option(arguments);
            c.result.append_option(s.result.as_deref());
            c.status.append_value(if s.error { "error" } else { "ok" });
            c.error_type.append_option(s.error_type.as_deref());
            c.model.append_option(s.model.as_deref());
            c.input_tokens.append_option(s.input_tokens);
            c.output_tokens.append_option(s.output_tokens);
            c.cost_usd.append_option(s.cost_usd);
            c.approval_status
                .append_option(s.approval_status.as_deref());
            c.policy_name.append_option(s.policy_name.as_deref());
            c.policy_decision
                .append_option(s.policy_decision.as_deref());
            c.state_target.append_option(s.state_target.as_deref());
            c.start.append_value(s.start);
            c.end.append_value(s.end);
            c.mcp.append_option(mcp);
            c.requested_by.append_option(s.requested_by.as_deref());
        }
    }

    /// A trace the builder could not read: stored as incomplete, with no steps.
    pub fn add_unbuildable(
        &mut self,
        item: &Closing,
        revision: i32,
        rows: &[&Row],
        late: usize,
        received: (i64, i64),
        error: &str,
    ) {
        let first = rows[0];
        let t = Trajectory {
            trace_id: item.trace_id.clone(),
            revision,
            status: "incomplete",
            close_reason: item.reason.clone(),
            agent_run: true,
            service_name: first.service_name.map(str::to_owned),
            agent_name: None,
            service_version: first.service_version.map(str::to_owned),
            steps: Vec::new(),
            root_span_id: None,
            root_name: None,
            case_id: None,
            conversation_id: None,
            user_id: None,
            input: None,
            final_output: None,
            incomplete_reasons: vec!["build_error".into()],
            start: rows.iter().map(|r| r.start).min().unwrap_or(0),
            end: rows.iter().map(|r| r.end).max().unwrap_or(0),
            span_count: rows.len(),
            late_spans: late,
        };
        self.add(&t, received, Vec::new(), Some(error));
    }

    pub fn finish(mut self) -> Result<(StructArray, StructArray), String> {
        let c = &mut self.t;
        let s = &mut self.s;
        let str_ = || DataType::Utf8;
        let trajectories: Vec<(&str, DataType, ArrayRef)> = vec![
            ("trace_id", str_(), Arc::new(c.trace_id.finish())),
            ("revision", DataType::Int32, Arc::new(c.revision.finish())),
            (
                "is_current",
                DataType::Boolean,
                Arc::new(c.is_current.finish()),
            ),
            ("status", str_(), Arc::new(c.status.finish())),
            ("close_reason", str_(), Arc::new(c.close_reason.finish())),
            (
                "incomplete_reasons",
                list(),
                Arc::new(c.incomplete_reasons.finish()),
            ),
            (
                "agent_run",
                DataType::Boolean,
                Arc::new(c.agent_run.finish()),
            ),
            ("service_name", str_(), Arc::new(c.service_name.finish())),
            ("agent_name", str_(), Arc::new(c.agent_name.finish())),
            (
                "service_version",
                str_(),
                Arc::new(c.service_version.finish()),
            ),
            ("root_span_id", str_(), Arc::new(c.root_span_id.finish())),
            ("root_name", str_(), Arc::new(c.root_name.finish())),
            ("case_id", str_(), Arc::new(c.case_id.finish())),
            (
                "conversation_id",
                str_(),
                Arc::new(c.conversation_id.finish()),
            ),
            ("user_id", str_(), Arc::new(c.user_id.finish())),
            ("input", str_(), Arc::new(c.input.finish())),
            ("final_output", str_(), Arc::new(c.final_output.finish())),
            ("steps", DataType::Int32, Arc::new(c.steps.finish())),
            (
                "tool_calls",
                DataType::Int32,
                Arc::new(c.tool_calls.finish()),
            ),
            ("llm_calls", DataType::Int32, Arc::new(c.llm_calls.finish())),
            (
                "input_tokens",
                DataType::Int64,
                Arc::new(c.input_tokens.finish()),
            ),
            (
                "output_tokens",
                DataType::Int64,
                Arc::new(c.output_tokens.finish()),
            ),
            ("cost_usd", DataType::Float64, Arc::new(c.cost_usd.finish())),
            (
                "unpriced_llm_calls",
                DataType::Int32,
                Arc::new(c.unpriced_llm_calls.finish()),
            ),
            (
                "error_count",
                DataType::Int32,
                Arc::new(c.error_count.finish()),
            ),
            (
                "span_count",
                DataType::Int32,
                Arc::new(c.span_count.finish()),
            ),
            (
                "late_spans",
                DataType::Int32,
                Arc::new(c.late_spans.finish()),
            ),
            (
                "start_time_unix_nano",
                DataType::UInt64,
                Arc::new(c.start.finish()),
            ),
            (
                "end_time_unix_nano",
                DataType::UInt64,
                Arc::new(c.end.finish()),
            ),
            (
                "first_received_at",
                ts(),
                Arc::new(c.first_received_at.finish()),
            ),
            (
                "last_received_at",
                ts(),
                Arc::new(c.last_received_at.finish()),
            ),
            ("closed_at", ts(), Arc::new(c.closed_at.finish())),
            ("verdict", str_(), Arc::new(c.verdict.finish())),
            (
                "verdict_reasons",
                list(),
                Arc::new(c.verdict_reasons.finish()),
            ),
            ("build_error", str_(), Arc::new(c.build_error.finish())),
            (
                "unrepresentable",
                str_(),
                Arc::new(c.unrepresentable.finish()),
            ),
            ("verdict_rules", list(), Arc::new(c.verdict_rules.finish())),
        ];
        let steps: Vec<(&str, DataType, ArrayRef)> = vec![
            ("trace_id", str_(), Arc::new(s.trace_id.finish())),
            ("revision", DataType::Int32, Arc::new(s.revision.finish())),
            ("seq", DataType::Int32, Arc::new(s.seq.finish())),
            ("span_id", str_(), Arc::new(s.span_id.finish())),
            (
                "parent_span_id",
                str_(),
                Arc::new(s.parent_span_id.finish()),
            ),
            ("depth", DataType::Int32, Arc::new(s.depth.finish())),
            ("kind", str_(), Arc::new(s.kind.finish())),
            ("span_kind", str_(), Arc::new(s.span_kind.finish())),
            ("name", str_(), Arc::new(s.name.finish())),
            ("agent_name", str_(), Arc::new(s.agent_name.finish())),
            ("tool_name", str_(), Arc::new(s.tool_name.finish())),
            ("tool_call_id", str_(), Arc::new(s.tool_call_id.finish())),
            ("arguments", str_(), Arc::new(s.arguments.finish())),
            ("result", str_(), Arc::new(s.result.finish())),
            ("status", str_(), Arc::new(s.status.finish())),
            ("error_type", str_(), Arc::new(s.error_type.finish())),
            ("model", str_(), Arc::new(s.model.finish())),
            (
                "input_tokens",
                DataType::Int64,
                Arc::new(s.input_tokens.finish()),
            ),
            (
                "output_tokens",
                DataType::Int64,
                Arc::new(s.output_tokens.finish()),
            ),
            ("cost_usd", DataType::Float64, Arc::new(s.cost_usd.finish())),
            (
                "approval_status",
                str_(),
                Arc::new(s.approval_status.finish()),
            ),
            ("policy_name", str_(), Arc::new(s.policy_name.finish())),
            (
                "policy_decision",
                str_(),
                Arc::new(s.policy_decision.finish()),
            ),
            ("state_target", str_(), Arc::new(s.state_target.finish())),
            (
                "start_time_unix_nano",
                DataType::UInt64,
                Arc::new(s.start.finish()),
            ),
            (
                "end_time_unix_nano",
                DataType::UInt64,
                Arc::new(s.end.finish()),
            ),
            ("mcp", str_(), Arc::new(s.mcp.finish())),
            ("requested_by", str_(), Arc::new(s.requested_by.finish())),
        ];
        Ok((struct_of(trajectories)?, struct_of(steps)?))
    }
}

fn struct_of(columns: Vec<(&str, DataType, ArrayRef)>) -> Result<StructArray, String> {
    let fields: Fields = columns
        .iter()
        .map(|(name, dt, _)| Field::new(*name, dt.clone(), true))
        .collect();
    let arrays = columns.into_iter().map(|(_, _, a)| a).collect();
    StructArray::try_new(fields, arrays, None).map_err(|e| e.to_string())
}
