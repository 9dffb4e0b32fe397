//! When the calls of a native benchmark load are due, shared by the gRPC load (`grpc_load.rs`)
//! and the HTTP load (`http_load.rs`): open loop at a rate or closed loop, a budget of calls,
//! a duration, a stop on interrupt, and the runtime the calls run on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use tokio::task::JoinSet;

/// Tokio's timer rounds a wake-up up to its next millisecond tick, and a call measured from
/// when it was due would count that as the server's latency: the last stretch is slept by the
/// system's timer (tens of microseconds late) in a blocking thread.
const TIMER_GRAIN: Duration = Duration::from_millis(2);

async fn until(at: Instant) {
    if let Some(early) = at.checked_sub(TIMER_GRAIN) {
        tokio::time::sleep_until(early.into()).await;
    }
    let left = at.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}

/// The calls of one run, numbered from 0, taken by its senders as each is free.
pub(crate) struct Schedule {
    rate: f64,
    budget: Option<u64>,
    started: Instant,
    pub(crate) deadline: Instant,
    next: AtomicU64,
    stop: AtomicBool,
}

impl Schedule {
    /// Starting now: `rate` calls a second (0: closed loop), at most `requests` calls (0: no
    /// budget), for `duration` seconds.
    pub(crate) fn new(rate: f64, requests: u64, duration: f64) -> Self {
        let started = Instant::now();
        Schedule {
            rate,
            budget: (requests > 0).then_some(requests),
            started,
            deadline: started + Duration::from_secs_f64(duration),
            next: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    /// The next call's number and the moment it is due, once it is; None when the run is over
    /// (its duration, its budget of calls, or an interrupt). Open loop, call n is due at
    /// start + n / rate whatever the calls before it did; closed loop, at once.
    pub(crate) async fn next_call(&self) -> Option<(u64, Instant)> {
        if self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return None;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        if self.budget.is_some_and(|budget| n >= budget) {
            return None;
        }
        if self.rate <= 0.0 {
            return Some((n, Instant::now()));
        }
        let due = self.started + Duration::from_secs_f64(n as f64 / self.rate);
        until(due.min(self.deadline)).await;
        (due < self.deadline && !self.stop.load(Ordering::Relaxed)).then_some((n, due))
    }
}

/// The calls run on the calling thread, or on `threads` threads of their own when more than one.
pub(crate) fn runtime(threads: usize) -> PyResult<tokio::runtime::Runtime> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(threads).thread_name("sextant-load");
        builder
    };
    builder
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| PyOSError::new_err(e.to_string()))
}

/// Whether the caller is Python's main thread, the one that sees an interrupt (Ctrl-C).
pub(crate) fn on_main_thread(py: Python<'_>) -> PyResult<bool> {
    let threading = py.import("threading")?;
    Ok(threading
        .call_method0("current_thread")?
        .is(&threading.call_method0("main_thread")?))
}

/// Every sender's result, once each is done. On Python's main thread an interrupt stops them;
/// elsewhere signals are not Python's to see, and the GIL is not taken at all.
pub(crate) async fn gather<T: Send + 'static>(
    schedule: &Schedule,
    mut senders: JoinSet<T>,
    on_main_thread: bool,
) -> PyResult<Vec<T>> {
    let mut done = Vec::new();
    let mut ticks = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            finished = senders.join_next() => match finished {
                Some(Ok(sent)) => done.push(sent),
                Some(Err(e)) => return Err(PyOSError::new_err(format!("a sender failed: {e}"))),
                None => return Ok(done),
            },
            _ = ticks.tick(), if on_main_thread => {
                if let Err(interrupt) = Python::attach(|py| py.check_signals()) {
                    schedule.stop.store(true, Ordering::Relaxed);
                    senders.abort_all();
                    return Err(interrupt);
                }
            }
        }
    }
}
