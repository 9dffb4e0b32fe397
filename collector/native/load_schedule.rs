//! When the calls of a native benchmark load are due, shared by the gRPC load (`grpc_load.rs`)
//! and the HTTP load (`http_load.rs`): open loop at a rate or closed loop, a budget of calls,
//! a duration, a stop on interrupt, and the runtime the calls run on.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Semaphore;
use tokio::task::{AbortHandle, JoinSet};

/// Permits added once the last call is released: every sender still waiting takes one and
/// finds the run over.
const END_PERMITS: usize = Semaphore::MAX_PERMITS >> 1;

/// A timer in the runtime's own epoll (a timerfd): tokio's timer rounds a wake-up up to its
/// next millisecond tick, and a call measured from when it was due would count that as the
/// server's latency. The system's timer is tens of microseconds late, and the thread it wakes
/// is the one that sends the call (a sleep in a blocking thread instead cost three thread
/// switches a call, a fifth of the client's CPU at 1,000 calls a second).
struct Timer(AsyncFd<OwnedFd>);

impl Timer {
    fn new() -> io::Result<Self> {
        // SAFETY: timerfd_create takes no pointers; a descriptor it returns is ours alone.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else; the AsyncFd owns it until
        // it is dropped, and nothing replaces or closes it meanwhile.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE)? };
        Ok(Timer(fd))
    }

    async fn until(&self, at: Instant) -> io::Result<()> {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let spec = libc::itimerspec {
            it_interval: zero,
            it_value: libc::timespec {
                tv_sec: left.as_secs() as libc::time_t,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            },
        };
        let fd = self.0.get_ref().as_raw_fd();
        // SAFETY: `spec` lives across the call; a null old value is allowed.
        if unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut ready = self.0.readable().await?;
            let read = ready.try_io(|fd| {
                let mut expirations = [0u8; 8];
                // SAFETY: reads at most the 8 bytes of `expirations`.
                let n = unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            if let Ok(result) = read {
                return result;
            }
        }
    }
}

/// When call n is due, and which calls there are.
#[derive(Clone, Copy)]
struct Times {
    rate: f64,
    budget: Option<u64>,
    started: Instant,
    deadline: Instant,
}

impl Times {
    fn due(&self, n: u64) -> Instant {
        self.started + Duration::from_secs_f64(n as f64 / self.rate)
    }

    /// Whether call n is one of the run's (open loop: due before its end).
    fn has(&self, n: u64) -> bool {
        self.budget.is_none_or(|budget| n < budget) && self.due(n) < self.deadline
    }
}

/// Open loop: each call's permit is added when it is due (every call due by then, when the
/// runtime was late), then the end's.
async fn pace(times: Times, due: Arc<Semaphore>, stop: Arc<AtomicBool>) {
    let timer = Timer::new().ok();
    let mut released = 0;
    while times.has(released) && !stop.load(Ordering::Relaxed) {
        let at = times.due(released);
        let precise = match &timer {
            Some(timer) => timer.until(at).await.is_ok(),
            None => false,
        };
        if !precise {
            tokio::time::sleep_until(at.into()).await;
        }
        let now = Instant::now();
        let first = released;
        while times.has(released) && times.due(released) <= now {
            released += 1;
        }
        due.add_permits((released - first) as usize);
    }
    due.add_permits(END_PERMITS);
}

/// The calls of one run, numbered from 0, taken by its senders as each is free.
pub(crate) struct Schedule {
    times: Times,
    pub(crate) deadline: Instant,
    next: AtomicU64,
    stop: Arc<AtomicBool>,
    /// Open loop: a permit for each call due (`pace`).
    due: Arc<Semaphore>,
    pacer: Option<AbortHandle>,
}

impl Schedule {
    /// Starting now: `rate` calls a second (0: closed loop), at most `requests` calls (0: no
    /// budget), for `duration` seconds. In a runtime: open loop, its pacer runs there.
    pub(crate) fn new(rate: f64, requests: u64, duration: f64) -> Self {
        let started = Instant::now();
        let times = Times {
            rate,
            budget: (requests > 0).then_some(requests),
            started,
            deadline: started + Duration::from_secs_f64(duration),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let due = Arc::new(Semaphore::new(0));
        let pacer = (rate > 0.0)
            .then(|| tokio::spawn(pace(times, due.clone(), stop.clone())).abort_handle());
        Schedule {
            times,
            deadline: times.deadline,
            next: AtomicU64::new(0),
            stop,
            due,
            pacer,
        }
    }

    /// The next call's number and the moment it is due, once it is; None when the run is over
    /// (its duration, its budget of calls, or an interrupt). Open loop, call n is due at
    /// start + n / rate whatever the calls before it did; closed loop, at once.
    pub(crate) async fn next_call(&self) -> Option<(u64, Instant)> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        if self.times.rate <= 0.0 {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let over = self.times.budget.is_some_and(|budget| n >= budget)
                || Instant::now() >= self.deadline;
            return (!over).then(|| (n, Instant::now()));
        }
        self.due.acquire().await.ok()?.forget();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        (self.times.has(n) && !self.stop.load(Ordering::Relaxed)).then(|| (n, self.times.due(n)))
    }
}

impl Drop for Schedule {
    fn drop(&mut self) {
        if let Some(pacer) = &self.pacer {
            pacer.abort();
        }
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
