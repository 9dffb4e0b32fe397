//! The runtime guard's judgement in native code: the run so far plus the proposed call, built
//! by the native builder and weighed by the native rule interpreter, as
//! collector/guard/check.py `weigh_call` weighs it (which stays the specification; the
//! differential test tests/unit/guard/test_native_judge.py holds the two equal).
//!
//! A judgement in Python (building the run with the call, each rule over every step) costs most
//! of a call on the event loop. Here the runs the guard was asked about are kept as rows, grown
//! by every acknowledged batch that carries their spans, so a call costs neither the rows read
//! again from Python nor a Python object per step; the event loop (`judge`) and the gRPC
//! listener's threads (guard_listen.rs) weigh calls with it. Whatever this side does not weigh
//! as Python does (a rule it defers, a run its builder refuses, flow and MCP rules, which judge
//! the call as a step of its own) is answered "deferred", and the caller weighs the call in
//! Python instead.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::RandomState;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::types::{Int64Type, UInt32Type, UInt64Type};
use arrow_array::{Array, StructArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyDict, PyList, PyString};

use crate::arrow_py::import_struct;
use crate::assemble::{build_trajectory, encoded, prims, strs, Prices, Row, SpanMemo, Trajectory};
use crate::guard_answer::{answer_for, Answered, Asked, Settings, Verdict};
use crate::guard_listen::{InForce, Policy, Recorded, Target};
use crate::rules::NativePack;
use crate::rules_eval::{finding, has_override, steps_of, unique, Finding, Run, StepRow};
use crate::rules_pack::{Check, Pack, Rule};
use crate::rules_precedes::precedes_step;
use crate::rules_value::Defer;

/// The rule types the guard asks (evaluators/guard.py `GUARD_RULE_TYPES`).
const GUARD_RULE_TYPES: [&str; 8] = [
    "absence",
    "tool_args",
    "precedes",
    "budget",
    "flow",
    "mcp",
    "secrets",
    "pii",
];

/// Acknowledged batches remembered at most while a run is read in a guard thread (a read lasts
/// at most the guard's deadline: a few hundred batches at full load); past it, the run read is
/// not kept (asked again, it is read again).
const RECENT_BATCHES: usize = 1_024;

/// One span of a run, owned: the columns of `spans` the builder reads.
#[derive(Clone, Default)]
pub(crate) struct OwnedRow {
    trace_id: String,
    span_id: String,
    parent_span_id: Option<String>,
    flags: Option<u32>,
    name: Option<String>,
    kind: Option<String>,
    scope_name: Option<String>,
    start: u64,
    end: u64,
    status_code: Option<String>,
    step_kind: Option<String>,
    tool_name: Option<String>,
    tool_call_id: Option<String>,
    tool_arguments: Option<String>,
    tool_result: Option<String>,
    model: Option<String>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    agent_name: Option<String>,
    conversation_id: Option<String>,
    user_id: Option<String>,
    error_type: Option<String>,
    service_name: Option<String>,
    service_version: Option<String>,
    attributes: Option<String>,
    events: Option<String>,
    /// Its attributes as read by the builder, kept with the run between calls.
    memo: SpanMemo,
}

impl OwnedRow {
    /// The proposed call as check.py `proposed_row` makes it: a tool span starting now, under
    /// the guard's own span id; `resource` the service and version, `tool` its name, the
    /// model's id for it and its arguments (compact JSON).
    pub(crate) fn proposed(
        trace_id: &str,
        span_id: &str,
        parent_span_id: Option<String>,
        now_ns: u64,
        resource: (&str, Option<&str>),
        tool: (&str, Option<&str>, &str),
    ) -> Self {
        let (name, tool_call_id, arguments) = tool;
        OwnedRow {
            trace_id: trace_id.to_owned(),
            span_id: span_id.to_owned(),
            parent_span_id,
            flags: Some(0),
            name: Some(name.to_owned()),
            kind: Some("INTERNAL".to_owned()),
            scope_name: Some("sextant.guard".to_owned()),
            start: now_ns,
            end: now_ns,
            status_code: Some("UNSET".to_owned()),
            step_kind: Some("tool".to_owned()),
            tool_name: Some(name.to_owned()),
            tool_call_id: tool_call_id.map(str::to_owned),
            tool_arguments: Some(arguments.to_owned()),
            service_name: Some(resource.0.to_owned()),
            service_version: resource.1.map(str::to_owned),
            attributes: Some(r#"{"sextant.guard.proposed":true}"#.to_owned()),
            ..OwnedRow::default()
        }
    }

    fn row(&self) -> Row<'_> {
        Row {
            trace_id: &self.trace_id,
            span_id: &self.span_id,
            parent_span_id: self.parent_span_id.as_deref(),
            flags: self.flags,
            name: self.name.as_deref(),
            kind: self.kind.as_deref(),
            scope_name: self.scope_name.as_deref(),
            start: self.start,
            end: self.end,
            status_code: self.status_code.as_deref(),
            step_kind: self.step_kind.as_deref(),
            tool_name: self.tool_name.as_deref(),
            tool_call_id: self.tool_call_id.as_deref(),
            tool_arguments: self.tool_arguments.as_deref(),
            tool_result: self.tool_result.as_deref(),
            model: self.model.as_deref(),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            agent_name: self.agent_name.as_deref(),
            conversation_id: self.conversation_id.as_deref(),
            user_id: self.user_id.as_deref(),
            error_type: self.error_type.as_deref(),
            service_name: self.service_name.as_deref(),
            service_version: self.service_version.as_deref(),
            attributes: self.attributes.as_deref(),
            events: self.events.as_deref(),
            received_at: 0,
            memo: Some(&self.memo),
        }
    }

    /// A span row as Python holds it (a dict of the `spans` columns).
    fn from_dict(d: &Bound<'_, PyDict>) -> PyResult<Self> {
        fn get<T>(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<T>>
        where
            T: for<'a, 'py> FromPyObject<'a, 'py>,
        {
            match d.get_item(key)? {
                None => Ok(None),
                Some(v) if v.is_none() => Ok(None),
                Some(v) => v.extract::<T>().map(Some).map_err(Into::into),
            }
        }
        Ok(OwnedRow {
            trace_id: get(d, "trace_id")?.unwrap_or_default(),
            span_id: get(d, "span_id")?.unwrap_or_default(),
            parent_span_id: get(d, "parent_span_id")?,
            flags: get(d, "flags")?,
            name: get(d, "name")?,
            kind: get(d, "kind")?,
            scope_name: get(d, "scope_name")?,
            start: get(d, "start_time_unix_nano")?.unwrap_or(0),
            end: get(d, "end_time_unix_nano")?.unwrap_or(0),
            status_code: get(d, "status_code")?,
            step_kind: get(d, "step_kind")?,
            tool_name: get(d, "tool_name")?,
            tool_call_id: get(d, "tool_call_id")?,
            tool_arguments: get(d, "tool_arguments")?,
            tool_result: get(d, "tool_result")?,
            model: get(d, "model")?,
            input_tokens: get(d, "input_tokens")?,
            output_tokens: get(d, "output_tokens")?,
            agent_name: get(d, "agent_name")?,
            conversation_id: get(d, "conversation_id")?,
            user_id: get(d, "user_id")?,
            error_type: get(d, "error_type")?,
            service_name: get(d, "service_name")?,
            service_version: get(d, "service_version")?,
            attributes: get(d, "attributes")?,
            events: get(d, "events")?,
            memo: SpanMemo::default(),
        })
    }
}

/// The spans of a batch (the `spans` columns) whose trace `wanted` takes, owned.
fn rows_in(batch: &StructArray, wanted: impl Fn(&str) -> bool) -> PyResult<Vec<OwnedRow>> {
    let column = |name| strs(batch, name).map_err(PyValueError::new_err);
    let trace_ids = column("trace_id")?;
    let picked: Vec<usize> = (0..batch.len())
        .filter(|&i| trace_ids[i].is_some_and(&wanted))
        .collect();
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let t = |name| column(name);
    let (span_id, parent, name, kind, scope) = (
        t("span_id")?,
        t("parent_span_id")?,
        t("name")?,
        t("kind")?,
        t("scope_name")?,
    );
    let (status, step_kind, tool_name, tool_call_id) = (
        t("status_code")?,
        t("step_kind")?,
        t("tool_name")?,
        t("tool_call_id")?,
    );
    let (arguments, result, model, agent, conversation) = (
        t("tool_arguments")?,
        t("tool_result")?,
        t("model")?,
        t("agent_name")?,
        t("conversation_id")?,
    );
    let (user, error, service, version, attributes, events) = (
        t("user_id")?,
        t("error_type")?,
        t("service_name")?,
        t("service_version")?,
        t("attributes")?,
        t("events")?,
    );
    let flags = prims::<UInt32Type>(batch, "flags").map_err(PyValueError::new_err)?;
    let start =
        prims::<UInt64Type>(batch, "start_time_unix_nano").map_err(PyValueError::new_err)?;
    let end = prims::<UInt64Type>(batch, "end_time_unix_nano").map_err(PyValueError::new_err)?;
    let input_tokens = prims::<Int64Type>(batch, "input_tokens").map_err(PyValueError::new_err)?;
    let output_tokens =
        prims::<Int64Type>(batch, "output_tokens").map_err(PyValueError::new_err)?;
    let owned = |s: Option<&str>| s.map(str::to_owned);
    Ok(picked
        .into_iter()
        .map(|i| OwnedRow {
            trace_id: trace_ids[i].unwrap_or_default().to_owned(),
            span_id: span_id[i].unwrap_or_default().to_owned(),
            parent_span_id: owned(parent[i]),
            flags: flags[i],
            name: owned(name[i]),
            kind: owned(kind[i]),
            scope_name: owned(scope[i]),
            start: start[i].unwrap_or(0),
            end: end[i].unwrap_or(0),
            status_code: owned(status[i]),
            step_kind: owned(step_kind[i]),
            tool_name: owned(tool_name[i]),
            tool_call_id: owned(tool_call_id[i]),
            tool_arguments: owned(arguments[i]),
            tool_result: owned(result[i]),
            model: owned(model[i]),
            input_tokens: input_tokens[i],
            output_tokens: output_tokens[i],
            agent_name: owned(agent[i]),
            conversation_id: owned(conversation[i]),
            user_id: owned(user[i]),
            error_type: owned(error[i]),
            service_name: owned(service[i]),
            service_version: owned(version[i]),
            attributes: owned(attributes[i]),
            events: owned(events[i]),
            memo: SpanMemo::default(),
        })
        .collect())
}

/// A run kept: its rows in the order acknowledged, each span once.
struct Kept {
    /// Shared, so a judgement takes the run and weighs it without the lock.
    rows: Vec<Arc<OwnedRow>>,
    ids: HashSet<String>,
    used: u64,
}

impl Kept {
    fn add(&mut self, row: OwnedRow) {
        if self.ids.insert(row.span_id.clone()) {
            self.rows.push(Arc::new(row));
        }
    }
}

struct Runs {
    kept: HashMap<String, Kept>,
    /// Acknowledged batches held so far, and the latest of them.
    seq: u64,
    recent: VecDeque<(u64, StructArray)>,
    /// The reads in progress, by the batch they began after (how many began there).
    readers: BTreeMap<u64, usize>,
    tick: u64,
    most: usize,
    /// Spans a kept run holds at most; a run past it is let go (weighed in Python, from the
    /// store, as the assembler closes such a trace early).
    most_spans: usize,
    /// The price table's `(prefix, input, output)`, for each judgement's own `Prices`.
    prices: Arc<Vec<(String, f64, f64)>>,
}

impl Runs {
    fn touch(&mut self, trace_id: &str) {
        self.tick += 1;
        if let Some(k) = self.kept.get_mut(trace_id) {
            k.used = self.tick;
        }
    }

    /// The least recently asked runs let go, down to `most`.
    fn bound(&mut self) {
        if self.kept.len() <= self.most {
            return;
        }
        let mut ages: Vec<(u64, String)> = self
            .kept
            .iter()
            .map(|(id, k)| (k.used, id.clone()))
            .collect();
        ages.sort_unstable();
        let over = self.kept.len() - self.most;
        for (_, id) in ages.into_iter().take(over) {
            self.kept.remove(&id);
        }
    }
}

/// What a judgement found: per pack whether it selects the run, whether a model call of the
/// run asked for the call, the rules' verdicts about the call (answer, reason, message,
/// evidence), the span the call runs under, the first agent and version the run's spans name.
type Judged = (
    Vec<bool>,
    bool,
    Vec<Verdict>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// A call answered: the answer, and the span the call runs under.
pub(crate) struct Judgement {
    pub answered: Answered,
    pub parent: Option<String>,
}

/// The runs kept and what the answers depend on besides them, shared by Python's calls and
/// the gRPC listener's threads (guard_listen.rs).
pub(crate) struct GuardCore {
    runs: Mutex<Runs>,
    pub(crate) policy: Mutex<Policy>,
    /// Calls the listener answered, for Python to record and count.
    pub(crate) answered: Mutex<Vec<Recorded>>,
    pub(crate) seed: RandomState,
    /// Python's `adopt(trace_id) -> bool` and `decision_of(service, agent, version) ->
    /// (decision, reasons)`, called by the listener (with the GIL) for a run not kept yet and
    /// a target whose decision it was not told since they changed; None once not listening
    /// (they hold the guard, which holds these runs: the cycle is broken at shutdown).
    pub(crate) callbacks: Mutex<Option<(Py<PyAny>, Py<PyAny>)>>,
    /// Runs the adopter could not keep lately (not loaded yet, not held whole), by when: not
    /// asked again for `UNADOPTED_FOR`, their calls going to the event loop meanwhile.
    unadopted: Mutex<HashMap<String, Instant>>,
    /// Calls answered by the listener not recorded because `answered` was full.
    pub(crate) dropped: AtomicU64,
}

/// How long a run the adopter could not keep is left to the event loop (which keeps it too).
const UNADOPTED_FOR: Duration = Duration::from_secs(1);
/// Runs remembered as not kept at most.
const UNADOPTED_MOST: usize = 10_000;
/// Targets whose decisions are read again when the decisions change, at most (the rest are
/// read when a call asks).
const DECISIONS_REFRESHED: usize = 1_000;

/// Calls answered by the listener waiting to be recorded at most (the recorder's own bound is
/// `guard.max_unrecorded`); past it a call's step is dropped and counted.
pub(crate) const ANSWERED_MOST: usize = 100_000;

/// The runs the guard was asked about, kept natively, and their judgement.
#[pyclass(frozen, module = "collector.normalize._native")]
pub struct GuardRuns {
    core: Arc<GuardCore>,
}

impl GuardRuns {
    fn lock(&self) -> std::sync::MutexGuard<'_, Runs> {
        self.core.lock()
    }

    fn policy(&self) -> std::sync::MutexGuard<'_, Policy> {
        lock(&self.core.policy)
    }

    /// The core, for the listener that answers calls with it.
    pub(crate) fn core(&self) -> Arc<GuardCore> {
        self.core.clone()
    }
}

type Recording = (
    (String, String, Option<String>, String, Option<String>),
    Settled,
    (String, u64, u64, f64, &'static str),
);

type Settled = (
    String,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    String,
    Option<String>,
);

fn settled(j: Judgement) -> Settled {
    let a = j.answered;
    (
        a.answer, a.reasons, a.evidence, a.messages, a.decision, j.parent,
    )
}

#[pymethods]
impl GuardRuns {
    /// `most`: runs kept at once; `most_spans`: spans a kept run holds at most; `prices`: the
    /// price table's `(prefix, input, output)` in lookup order.
    #[new]
    fn new(most: usize, most_spans: usize, prices: Vec<(String, f64, f64)>) -> Self {
        let runs = Runs {
            kept: HashMap::new(),
            seq: 0,
            recent: VecDeque::new(),
            readers: BTreeMap::new(),
            tick: 0,
            most,
            most_spans,
            prices: Arc::new(prices),
        };
        let policy = Policy {
            sessions: true,
            ..Policy::default()
        };
        GuardRuns {
            core: Arc::new(GuardCore {
                runs: Mutex::new(runs),
                policy: Mutex::new(policy),
                answered: Mutex::new(Vec::new()),
                seed: RandomState::new(),
                callbacks: Mutex::new(None),
                unadopted: Mutex::new(HashMap::new()),
                dropped: AtomicU64::new(0),
            }),
        }
    }

    /// Keep the run of `trace_id` as these rows (dicts of the `spans` columns, as the held
    /// batches give them), replacing what was kept of it, with its spans of the batches held
    /// after the `since`-th (acknowledged while the rows were read). False, and nothing
    /// kept, when some of those batches are no longer remembered.
    #[pyo3(signature = (trace_id, rows, since))]
    fn adopt(&self, trace_id: &str, rows: &Bound<'_, PyList>, since: u64) -> PyResult<bool> {
        let mut kept = Kept {
            rows: Vec::with_capacity(rows.len()),
            ids: HashSet::with_capacity(rows.len()),
            used: 0,
        };
        for row in rows.iter() {
            kept.add(OwnedRow::from_dict(row.cast::<PyDict>()?)?);
        }
        let mut runs = self.lock();
        let remembered = runs.recent.front().map_or(runs.seq + 1, |(seq, _)| *seq);
        if since + 1 < remembered && since < runs.seq {
            runs.kept.remove(trace_id);
            return Ok(false);
        }
        for (_, batch) in runs.recent.iter().filter(|(seq, _)| *seq > since) {
            for row in rows_in(batch, |t| t == trace_id)? {
                kept.add(row);
            }
        }
        if kept.rows.len() > runs.most_spans {
            runs.kept.remove(trace_id);
            return Ok(false);
        }
        runs.kept.insert(trace_id.to_owned(), kept);
        runs.touch(trace_id);
        runs.bound();
        Ok(true)
    }

    /// An acknowledged batch (the `spans` columns): its spans that belong to a kept run join
    /// it, and the batch is remembered a while, for a run adopted from rows read meanwhile;
    /// how many spans joined a kept run.
    fn hold(&self, batch: &Bound<'_, PyAny>) -> PyResult<usize> {
        let batch = import_struct(batch, "spans")?;
        let mut runs = self.lock();
        runs.seq += 1;
        if !runs.readers.is_empty() {
            let seq = runs.seq;
            runs.recent.push_back((seq, batch.clone()));
            while runs.recent.len() > RECENT_BATCHES {
                runs.recent.pop_front();
            }
        }
        if runs.kept.is_empty() {
            return Ok(0);
        }
        let most_spans = runs.most_spans;
        let kept = &mut runs.kept;
        let rows = rows_in(&batch, |t| kept.contains_key(t))?;
        let joined = rows.len();
        for row in rows {
            let trace_id = row.trace_id.clone();
            if let Some(k) = kept.get_mut(&trace_id) {
                k.add(row);
                if k.rows.len() > most_spans {
                    kept.remove(&trace_id);
                }
            }
        }
        Ok(joined)
    }

    /// How many acknowledged batches were held so far: what a run read now is adopted with
    /// (`adopt(..., since)`) when nothing is acknowledged while it is read (on the event loop,
    /// where batches are acknowledged).
    fn seq(&self) -> u64 {
        self.lock().seq
    }

    /// A run is about to be read (in a guard thread, while batches are acknowledged): the
    /// batches from now on are remembered until `end_read`; the `since` to adopt it with.
    fn begin_read(&self) -> u64 {
        let mut runs = self.lock();
        let since = runs.seq;
        *runs.readers.entry(since).or_default() += 1;
        since
    }

    /// The read that began at `since` is over: batches no read needs are let go.
    fn end_read(&self, since: u64) {
        let mut runs = self.lock();
        if let Some(n) = runs.readers.get_mut(&since) {
            *n -= 1;
            if *n == 0 {
                runs.readers.remove(&since);
            }
        }
        let oldest = runs.readers.keys().next().copied();
        match oldest {
            None => runs.recent.clear(),
            Some(oldest) => {
                while runs.recent.front().is_some_and(|(seq, _)| *seq <= oldest) {
                    runs.recent.pop_front();
                }
            }
        }
    }

    /// How many spans are kept of the run (None: it is not kept).
    fn count(&self, trace_id: &str) -> Option<usize> {
        self.lock().kept.get(trace_id).map(|k| k.rows.len())
    }

    /// How many more runs are kept before the least recently asked is let go.
    fn room(&self) -> usize {
        let runs = self.lock();
        runs.most.saturating_sub(runs.kept.len())
    }

    /// Let go of a run.
    fn forget(&self, trace_id: &str) {
        self.lock().kept.remove(trace_id);
    }

    /// The proposed call (`call`: the span row `proposed_row` makes, its parent None when the
    /// agent did not say) weighed against the kept run's spans of its service under the packs
    /// in force (`set_packs`), and answered under the target's decision: `decision_of(service,
    /// agent, version)` gives it as (decision, reasons that fire), and it is remembered for the
    /// listener until the decisions change. A tuple (answer, reasons, evidence, messages,
    /// decision, parent span), or the reason the call is left to Python.
    #[pyo3(signature = (call, agent, version, decision_of))]
    fn judge<'py>(
        &self,
        call: &Bound<'py, PyDict>,
        agent: Option<&str>,
        version: Option<&str>,
        decision_of: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = call.py();
        let proposed = OwnedRow::from_dict(call)?;
        let Some(packs) = self.policy().packs.clone() else {
            return Ok(PyString::new(py, "the packs in force are not native").into_any());
        };
        let core = &self.core;
        let gen = self.policy().decisions_gen;
        let decision = |service: &str, agent: &str, version: &str| {
            let found: (String, Vec<String>) =
                decision_of.call1((service, agent, version))?.extract()?;
            core.know_decision(gen, (service, agent, version), &found);
            Ok::<_, PyErr>(Some(found))
        };
        let judged = py.detach(|| core.judged(proposed, agent, version, &packs));
        Ok(
            match core.answered_from(judged, agent, version, &packs, decision)? {
                Ok(judgement) => settled(judgement).into_pyobject(py)?.into_any(),
                Err(why) => PyString::new(py, why).into_any(),
            },
        )
    }

    /// The packs in force as of generation `gen` (`packs_gen()` read before the packs were):
    /// their native forms (None: a guard rule of one is not native) and each one's `guard:`
    /// settings (writes, on_unknown, quarantine) and whether it asks session rules (none kept
    /// when a setting is not read natively: the calls go to Python). False, and nothing
    /// kept, when the packs changed since (to be told again).
    #[pyo3(signature = (gen, natives, settings))]
    fn set_packs(
        &self,
        gen: u64,
        natives: Option<Vec<PyRef<'_, NativePack>>>,
        settings: Vec<(Vec<String>, String, String, bool)>,
    ) -> bool {
        let made = natives.map(|natives| {
            natives
                .iter()
                .zip(settings)
                .map(
                    |(native, (writes, on_unknown, quarantine, asks_sessions))| {
                        Settings::new(&writes, on_unknown, quarantine).map(|settings| InForce {
                            pack: native.shared(),
                            settings,
                            asks_sessions,
                        })
                    },
                )
                .collect::<Result<Vec<_>, _>>()
        });
        let mut policy = self.policy();
        if gen != policy.packs_gen {
            return false;
        }
        policy.packs = match made {
            Some(Ok(packs)) => Some(Arc::new(packs)),
            _ => None,
        };
        true
    }

    /// The generation of the packs in force, changed by `packs_changed`.
    fn packs_gen(&self) -> u64 {
        self.policy().packs_gen
    }

    /// The packs in force changed: none is used until told them again.
    fn packs_changed(&self) {
        let mut policy = self.policy();
        policy.packs_gen += 1;
        policy.packs = None;
    }

    /// The decisions changed: the targets remembered (up to `DECISIONS_REFRESHED`) are read
    /// again now, with the GIL the publishing thread holds, so that a listener's next call
    /// about them does not wait for the GIL to read it; the others are forgotten.
    fn decisions_changed(&self, py: Python<'_>) {
        let targets: Vec<Target> = {
            let policy = self.policy();
            let remembered = policy.decisions.keys();
            remembered.take(DECISIONS_REFRESHED).cloned().collect()
        };
        let mut fresh = HashMap::new();
        if let Some((_, decider)) = self.core.callbacks(py) {
            for target in targets {
                let (service, agent, version) = &target;
                let read = decider.call1(py, (service, agent, version));
                if let Ok(found) = read.and_then(|d| d.extract::<(String, Vec<String>)>(py)) {
                    fresh.insert(target, found);
                }
            }
        }
        let mut policy = self.policy();
        policy.decisions_gen += 1;
        policy.decisions = fresh;
    }

    /// The gRPC listener answers calls for the runs kept, with the OTLP listener's `tokens`
    /// (none: no auth); `sessions`: conversations are held (a pack asking session rules
    /// leaves its calls to Python); `adopt(trace_id) -> bool` keeps a run not kept yet;
    /// `decision_of(service, agent, version)` gives a target's decision not remembered.
    fn listen(
        &self,
        tokens: Vec<Vec<u8>>,
        sessions: bool,
        adopt: Py<PyAny>,
        decision_of: Py<PyAny>,
    ) {
        *lock(&self.core.callbacks) = Some((adopt, decision_of));
        let mut policy = self.policy();
        policy.listening = true;
        policy.tokens = tokens;
        policy.sessions = sessions;
    }

    /// The listener answers no more calls (the callbacks to Python are let go).
    fn stop_listening(&self) {
        self.policy().listening = false;
        lock(&self.core.callbacks).take();
    }

    /// Calls the listener answered whose step was dropped since the last look (the queue of
    /// calls to record was full).
    fn dropped(&self) -> u64 {
        self.core.dropped.swap(0, Ordering::Relaxed)
    }

    /// The calls the listener answered since the last look, to record and count: each as
    /// ((trace id, service, version, tool, tool call id), (answer, reasons, evidence,
    /// messages, decision, parent span), (the guard's span id, start and end in ns, seconds
    /// from arrival to answer)).
    fn answered(&self) -> Vec<Recording> {
        let taken = std::mem::take(&mut *lock(&self.core.answered));
        taken
            .into_iter()
            .map(|r| {
                (
                    (r.trace_id, r.service, r.version, r.tool, r.tool_call_id),
                    settled(r.judgement),
                    (r.span_id, r.start_ns, r.end_ns, r.seconds, r.protocol),
                )
            })
            .collect()
    }
}

impl GuardCore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Runs> {
        lock(&self.runs)
    }

    /// Remember a target's decision, read from the decisions as of generation `gen`.
    pub(crate) fn know_decision(
        &self,
        gen: u64,
        target: (&str, &str, &str),
        found: &(String, Vec<String>),
    ) {
        let (service, agent, version) = target;
        let target = (service.to_owned(), agent.to_owned(), version.to_owned());
        let mut policy = lock(&self.policy);
        policy.know_decision(gen, target, found.clone());
    }

    /// The target's decision: remembered, else asked of Python's `decider` (with the GIL, no
    /// lock held) and remembered; None when there is no decider.
    pub(crate) fn decision_of(
        &self,
        service: &str,
        agent: &str,
        version: &str,
    ) -> Option<(String, Vec<String>)> {
        let gen = {
            let policy = lock(&self.policy);
            let key = (service.to_owned(), agent.to_owned(), version.to_owned());
            if let Some(found) = policy.decisions.get(&key) {
                return Some(found.clone());
            }
            policy.decisions_gen
        };
        let found: (String, Vec<String>) = with_gil(|py| {
            let (_, decider) = self.callbacks(py)?;
            decider
                .call1(py, (service, agent, version))
                .and_then(|d| d.extract(py))
                .ok()
        })?;
        self.know_decision(gen, (service, agent, version), &found);
        Some(found)
    }

    /// Whether the run is kept, else whether Python's `adopter` (with the GIL, no lock held:
    /// the event loop takes the runs' lock with the GIL held) kept it now.
    pub(crate) fn kept_or_adopted(&self, trace_id: &str) -> bool {
        if self.lock().kept.contains_key(trace_id) {
            return true;
        }
        let now = Instant::now();
        {
            let mut unadopted = lock(&self.unadopted);
            if unadopted
                .get(trace_id)
                .is_some_and(|at| now < *at + UNADOPTED_FOR)
            {
                return false;
            }
            unadopted.remove(trace_id);
        }
        let kept = with_gil(|py| {
            let (adopter, _) = self.callbacks(py)?;
            let kept = adopter
                .call1(py, (trace_id,))
                .and_then(|k| k.extract::<bool>(py));
            Some(kept.unwrap_or(false))
        });
        if kept == Some(false) {
            let mut unadopted = lock(&self.unadopted);
            if unadopted.len() >= UNADOPTED_MOST {
                unadopted.retain(|_, at| now < *at + UNADOPTED_FOR);
            }
            if unadopted.len() < UNADOPTED_MOST {
                unadopted.insert(trace_id.to_owned(), now);
            }
        }
        kept == Some(true)
    }

    /// The callbacks to Python, while listening (cloned with the GIL: no lock is held while
    /// Python runs them).
    fn callbacks(&self, py: Python<'_>) -> Option<(Py<PyAny>, Py<PyAny>)> {
        let callbacks = lock(&self.callbacks);
        let (adopt, decide) = callbacks.as_ref()?;
        Some((adopt.clone_ref(py), decide.clone_ref(py)))
    }

    /// The call weighed under `packs` and answered under the decision `decision_of` gives
    /// the target (None: not known here, and the call is left to Python).
    pub(crate) fn answer<E>(
        &self,
        proposed: OwnedRow,
        agent: Option<&str>,
        version: Option<&str>,
        packs: &[InForce],
        decision_of: impl FnOnce(&str, &str, &str) -> Result<Option<(String, Vec<String>)>, E>,
    ) -> Result<Result<Judgement, &'static str>, E> {
        let judged = self.judged(proposed, agent, version, packs);
        self.answered_from(judged, agent, version, packs, decision_of)
    }

    fn answered_from<E>(
        &self,
        judged: Result<(Judged, OwnedRow), &'static str>,
        agent: Option<&str>,
        version: Option<&str>,
        packs: &[InForce],
        decision_of: impl FnOnce(&str, &str, &str) -> Result<Option<(String, Vec<String>)>, E>,
    ) -> Result<Result<Judgement, &'static str>, E> {
        let ((selected, asked, verdicts, parent, first_agent, first_version), call) = match judged {
            Ok(j) => j,
            Err(why) => return Ok(Err(why)),
        };
        fn given(s: Option<&str>) -> Option<&str> {
            s.filter(|s| !s.is_empty())
        }
        let service = call.service_name.as_deref().unwrap_or_default();
        let agent = given(agent).or(first_agent.as_deref()).unwrap_or_default();
        let version = given(version)
            .or(first_version.as_deref())
            .unwrap_or_default();
        let Some((decision, fired)) = decision_of(service, agent, version)? else {
            return Ok(Err("the target's decision is not known here"));
        };
        let chosen: Vec<&Settings> = packs
            .iter()
            .zip(&selected)
            .filter(|(_, s)| **s)
            .map(|(p, _)| &p.settings)
            .collect();
        let tool_call_id = given(call.tool_call_id.as_deref());
        let was_asked = asked || tool_call_id.is_none();
        let asked = Asked {
            tool: call.tool_name.as_deref().unwrap_or_default(),
            tool_call_id,
        };
        let answered = answer_for(&asked, &chosen, was_asked, verdicts, &decision, &fired);
        Ok(Ok(Judgement { answered, parent }))
    }

    /// `weigh_call` on the kept run (its spans of the call's service) with the proposed call;
    /// with the call as weighed (its parent filled in).
    fn judged(
        &self,
        mut proposed: OwnedRow,
        agent: Option<&str>,
        version: Option<&str>,
        packs: &[InForce],
    ) -> Result<(Judged, OwnedRow), &'static str> {
        let packs: Vec<&Pack> = packs.iter().map(|p| &*p.pack).collect();
        let service = proposed.service_name.as_deref();
        let (own, prices) = {
            let mut runs = self.lock();
            runs.touch(&proposed.trace_id);
            let Some(kept) = runs.kept.get(&proposed.trace_id) else {
                return Err("run not kept");
            };
            let own: Vec<Arc<OwnedRow>> = kept
                .rows
                .iter()
                .filter(|r| r.service_name.as_deref() == service)
                .cloned()
                .collect();
            (own, runs.prices.clone())
        };
        let own: Vec<&OwnedRow> = own.iter().map(|r| &**r).collect();
        if own.is_empty() {
            return Err("no span of the service");
        }
        let parent = proposed.parent_span_id.clone().or_else(|| dangling(&own));
        proposed.parent_span_id = parent.clone();
        let first = |f: fn(&OwnedRow) -> &Option<String>| {
            own.iter()
                .find_map(|r| f(r).as_deref().filter(|s| !s.is_empty()))
                .map(str::to_owned)
        };
        let first_agent = first(|r| &r.agent_name);
        let first_version = first(|r| &r.service_version);
        let prices = Prices::new(prices.to_vec());
        let (selected, asked, verdicts) = weigh(&own, &proposed, agent, version, &packs, &prices)?;
        let judged = (
            selected,
            asked,
            verdicts,
            parent,
            first_agent,
            first_version,
        );
        Ok((judged, proposed))
    }
}

/// A lock, also after a thread panicked holding it (every guarded state stays consistent).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `f` with the GIL, from a listener thread (no lock of the guard's held: the event loop takes
/// them with the GIL held). Not `block_in_place`: handing the thread's other calls to another
/// thread for each wait cost more than the wait (the guard's p99 went from 2 to 100 ms).
fn with_gil<T>(f: impl FnOnce(Python<'_>) -> T) -> T {
    Python::attach(f)
}

/// `parent_of_call` without a parent given: the first parent a span names that is not among
/// the run's spans (the agent's own span, which has not ended, so is not stored).
fn dangling(rows: &[&OwnedRow]) -> Option<String> {
    let ids: HashSet<&str> = rows.iter().map(|r| r.span_id.as_str()).collect();
    rows.iter()
        .filter_map(|r| r.parent_span_id.as_deref())
        .find(|p| !p.is_empty() && !ids.contains(p))
        .map(str::to_owned)
}

type Weighed = (Vec<bool>, bool, Vec<Verdict>);

/// `weigh_call` from the built run on: the packs' selection, whether a model call asked for
/// the call, and each selected pack's guard rules about it.
fn weigh(
    own: &[&OwnedRow],
    proposed: &OwnedRow,
    agent: Option<&str>,
    version: Option<&str>,
    packs: &[&Pack],
    prices: &Prices,
) -> Result<Weighed, &'static str> {
    let mut rows: Vec<Row> = own.iter().map(|r| r.row()).collect();
    rows.push(proposed.row());
    let refs: Vec<&Row> = rows.iter().collect();
    let mut t = build_trajectory(&proposed.trace_id, &refs, prices, 1, "complete", 0)
        .map_err(|_| "the builder leaves the run to Python")?;
    let given = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_owned);
    t.agent_name = given(agent).or(t.agent_name.take());
    t.service_version = given(version).or(t.service_version.take());
    let span_id = proposed.span_id.as_str();
    let call = t
        .steps
        .iter_mut()
        .find(|s| s.span_id == span_id)
        .ok_or("the call is no step")?;
    if call.agent_name.as_deref().is_none_or(str::is_empty) {
        call.agent_name = agent.map(str::to_owned);
    }
    let asked = call.requested_by.is_some();
    let json = encoded(&t).map_err(|_| "arguments the builder cannot write")?;
    let step_rows = step_rows(&t, &json, &refs);
    let run = run_of(&t);
    let selected: Vec<bool> = packs.iter().map(|p| selects(p, &run)).collect();
    if proposed
        .tool_call_id
        .as_deref()
        .is_some_and(|id| !id.is_empty())
        && !asked
    {
        return Ok((selected, false, Vec::new()));
    }
    let input = run
        .input
        .filter(|i| !i.is_empty())
        .map(|i| serde_json::Value::String(i.to_owned()));
    // the run without the call, made only for a finding that may not be the call's
    let without: OnceCell<Vec<StepRow>> = OnceCell::new();
    let mut verdicts = Vec::new();
    for (pack, _) in packs.iter().zip(&selected).filter(|(_, s)| **s) {
        let steps = steps_of(&step_rows, pack).map_err(|Defer(why)| why)?;
        let call_step = steps
            .iter()
            .find(|s| s.row.span_id == Some(span_id))
            .ok_or("the call is no step")?;
        let before = OnceCell::new();
        for rule in pack.rules.iter().filter(|r| asked_of(r)) {
            if let Some(condition) = &rule.when_input {
                if !condition.check(input.as_ref()).map_err(|Defer(why)| why)? {
                    continue;
                }
            }
            let found = match &rule.check {
                Check::Precedes(p) => match precedes_step(&steps, p, call_step) {
                    Ok(None) => None,
                    Ok(Some(own)) => counted(rule, own, span_id, || Ok(None))?,
                    Err(Defer(why)) => return Err(why),
                },
                Check::Flow(_) | Check::Mcp { .. } => return Err("a rule judging the call alone"),
                _ => {
                    let f = finding(&run, &steps, rule).map_err(|Defer(why)| why)?;
                    counted(rule, f, span_id, || {
                        let rows = without.get_or_init(|| {
                            let other = |r: &&StepRow| r.span_id != Some(span_id);
                            step_rows.iter().filter(other).cloned().collect()
                        });
                        let before = before.get_or_init(|| steps_of(rows, pack));
                        let before = before.as_ref().map_err(|e| Defer(e.0))?;
                        finding(&run, before, rule).map(|f| Some(f.verdict))
                    })?
                }
            };
            verdicts.extend(found);
        }
    }
    Ok((selected, asked, verdicts))
}

/// A guard rule: a run rule (not over sessions) of the types the guard asks.
fn asked_of(rule: &Rule) -> bool {
    !rule.session && GUARD_RULE_TYPES.contains(&rule.rule_type.as_str())
}

/// `Selector.matches` on the run's service, agent and version.
fn selects(pack: &Pack, run: &Run) -> bool {
    [
        (&pack.service, run.service_name),
        (&pack.agent, run.agent_name),
        (&pack.service_version, run.service_version),
    ]
    .iter()
    .all(|(globs, value)| globs.as_ref().is_none_or(|g| g.matches(*value)))
}

/// collector/guard/verdicts.py `counted`: deny / review when the finding is about the call
/// (its evidence names the call, or `without` it the verdict differs); None when it is not.
fn counted(
    rule: &Rule,
    finding: Finding,
    span_id: &str,
    without: impl FnOnce() -> Result<Option<&'static str>, Defer>,
) -> Result<Option<Verdict>, &'static str> {
    if finding.verdict != "fail" && finding.verdict != "review" {
        return Ok(None);
    }
    if !finding.evidence.contains(&Some(span_id))
        && without().map_err(|Defer(why)| why)? == Some(finding.verdict)
    {
        return Ok(None);
    }
    let fail = finding.verdict == "fail";
    let answer = if fail { "deny" } else { "review" };
    let reason = match finding.reason.as_deref().filter(|r| !r.is_empty()) {
        Some(r) => r.to_owned(),
        None if fail => rule.reason.clone(),
        None => "review".to_owned(),
    };
    let mut evidence = finding.evidence.clone();
    evidence.push(Some(span_id));
    let evidence = unique(evidence)
        .into_iter()
        .map(|e| e.unwrap_or("None").to_owned())
        .collect();
    let message = format!("{}: {}", rule.id, finding.message);
    Ok(Some((answer.to_owned(), reason, message, evidence)))
}

/// The run's row of `trajectories` as the interpreter reads it.
fn run_of(t: &Trajectory) -> Run<'_> {
    Run {
        trace_id: &t.trace_id,
        revision: t.revision,
        status: Some(t.status),
        incomplete_reasons: t.incomplete_reasons.iter().map(String::as_str).collect(),
        agent_run: t.agent_run,
        service_name: t.service_name.as_deref(),
        agent_name: t.agent_name.as_deref(),
        service_version: t.service_version.as_deref(),
        root_span_id: t.root_span_id.as_deref(),
        input: t.input.as_deref(),
        final_output: t.final_output.as_deref(),
        user_id: t.user_id.as_deref(),
        start_time_unix_nano: t.start,
        end_time_unix_nano: t.end,
    }
}

/// The run's `steps` rows as the interpreter reads them (output.rs writes the same columns),
/// each with its span's attributes.
fn step_rows<'a>(
    t: &'a Trajectory,
    json: &'a [(Option<String>, Option<String>)],
    rows: &[&'a Row<'a>],
) -> Vec<StepRow<'a>> {
    t.steps
        .iter()
        .zip(json)
        .map(|(s, (arguments, mcp))| {
            let attributes = rows[s.source].attributes;
            let span_kind = s.span_kind.as_deref();
            let kind = s.kind.as_deref();
            StepRow {
                seq: s.seq,
                span_id: Some(&s.span_id),
                kind,
                span_kind,
                name: Some(&s.name),
                agent_name: s.agent_name.as_deref(),
                tool_name: s.tool_name.as_deref(),
                arguments: arguments.as_deref(),
                status: Some(if s.error { "error" } else { "ok" }),
                input_tokens: s.input_tokens,
                output_tokens: s.output_tokens,
                cost_usd: s.cost_usd,
                result: s.result.as_deref(),
                attributes,
                mcp: mcp.as_deref(),
                approval_override: if span_kind == Some("tool") || kind == Some("approval") {
                    has_override(attributes)
                } else {
                    Ok(false)
                },
                start_time_unix_nano: s.start,
                end_time_unix_nano: s.end,
                tool_call_id: s.tool_call_id.as_deref(),
                requested_by: s.requested_by.as_deref(),
                approval_status: s.approval_status.as_deref(),
            }
        })
        .collect()
}
