//! What the native listeners (OTLP/gRPC in grpc_server.rs, OTLP/HTTP in http_server.rs) share:
//! the socket and threads they serve on, and the hand-over of calls to Python's event loop.
//!
//! A call Python answers is queued here and the loop is woken by one byte on a pipe it watches;
//! the loop takes every call queued since it last looked with one `take` and answers each with
//! `reply`. Handing calls over in batches is what keeps a call's cost to the loop at what
//! Python does with it.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::net::{TcpListener as StdTcpListener, ToSocketAddrs};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyOSError;
use pyo3::{PyResult, Python};
use tokio::sync::oneshot;

/// Calls of type `C` waiting for Python, and the callers waiting for their answers `A`.
pub(crate) struct Handover<C, A> {
    waiting: Mutex<Vec<C>>,
    answers: Mutex<HashMap<u64, oneshot::Sender<A>>>,
    next_id: AtomicU64,
    /// Set when a byte is on its way to the loop and it has not taken the calls since.
    woken: AtomicBool,
    wake: Mutex<File>,
}

impl<C, A> Handover<C, A> {
    /// `wake_fd`: the write end of a non-blocking pipe the loop watches, owned from now on.
    pub fn new(wake_fd: i32) -> Self {
        // SAFETY: Python hands the descriptor over and never uses or closes it again.
        let wake = unsafe { File::from_raw_fd(wake_fd) };
        Handover {
            waiting: Mutex::new(Vec::new()),
            answers: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            woken: AtomicBool::new(false),
            wake: Mutex::new(wake),
        }
    }

    /// Queue the call `make(id)` for Python and wake its loop; the call is queued before the
    /// wake-up flag is read, and the loop clears the flag before it takes, so no call waits for
    /// a wake-up that never comes. Returns the call's id and where its answer arrives.
    pub fn hand_over(&self, make: impl FnOnce(u64) -> C) -> (u64, oneshot::Receiver<A>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.answers.lock().expect("answers").insert(id, answer);
        self.waiting.lock().expect("calls").push(make(id));
        self.wake();
        (id, answered)
    }

    /// Wake the loop unless a wake-up is already on its way.
    pub fn wake(&self) {
        if !self.woken.swap(true, Ordering::SeqCst) {
            // A full pipe already holds a wake-up the loop has not read: nothing is lost.
            let _ = self.wake.lock().expect("pipe").write(&[1]);
        }
    }

    /// The calls queued since the last take; clears the wake-up first, so a call queued
    /// meanwhile wakes the loop again.
    pub fn take(&self) -> Vec<C> {
        self.woken.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.waiting.lock().expect("calls"))
    }

    /// Answer call `id`; a call whose client left is ignored.
    pub fn reply(&self, id: u64, answer: A) {
        let waiting = self.answers.lock().expect("answers").remove(&id);
        if let Some(waiting) = waiting {
            let _ = waiting.send(answer);
        }
    }

    /// The answer to call `id`, or None when the listener is closed first. A caller that
    /// leaves first (the future dropped) is forgotten: Python's reply then finds no one.
    pub async fn answer(&self, id: u64, answered: oneshot::Receiver<A>) -> Option<A> {
        let _forget = Forget { handover: self, id };
        answered.await.ok()
    }

    /// Fail every call still waiting for its answer (the listener is closing).
    pub fn close(&self) {
        self.answers.lock().expect("answers").clear();
    }
}

struct Forget<'a, C, A> {
    handover: &'a Handover<C, A>,
    id: u64,
}

impl<C, A> Drop for Forget<'_, C, A> {
    fn drop(&mut self) {
        let answers = &self.handover.answers;
        answers.lock().expect("answers").remove(&self.id);
    }
}

/// A non-blocking socket listening on `host:port` (0: any free port), and its port.
pub(crate) fn bind(host: &str, port: u16) -> PyResult<(StdTcpListener, u16)> {
    let os = |e: std::io::Error| PyOSError::new_err(e.to_string());
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(os)?
        .next()
        .ok_or_else(|| PyOSError::new_err(format!("{host}: no address")))?;
    let listener = StdTcpListener::bind(addr).map_err(os)?;
    listener.set_nonblocking(true).map_err(os)?;
    let port = listener.local_addr().map_err(os)?.port();
    Ok((listener, port))
}

/// A runtime of `threads` threads named `name` (what `guard.listener_ahead` finds them by).
pub(crate) fn runtime(threads: usize, name: &str) -> PyResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name(name)
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| PyOSError::new_err(e.to_string()))
}

/// A listener's runtime and how it stops: the `stop`, `stopped` and `close` both servers give
/// Python.
pub(crate) struct Serving {
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    stopped: Arc<AtomicBool>,
}

impl Serving {
    /// Serving on `runtime`: the receiver that tells the server to stop taking connections,
    /// and the flag it sets once every connection has closed.
    pub fn new(runtime: tokio::runtime::Runtime) -> (Self, oneshot::Receiver<()>, Arc<AtomicBool>) {
        let (stop, stopping) = oneshot::channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let serving = Serving {
            runtime: Mutex::new(Some(runtime)),
            stop: Mutex::new(Some(stop)),
            stopped: stopped.clone(),
        };
        (serving, stopping, stopped)
    }

    /// Run `task` on the listener's threads.
    pub fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        if let Some(runtime) = self.runtime.lock().expect("runtime").as_ref() {
            runtime.spawn(task);
        }
    }

    /// Stop taking connections and calls; calls in flight are still answered.
    pub fn stop(&self) {
        if let Some(stop) = self.stop.lock().expect("stop").take() {
            let _ = stop.send(());
        }
    }

    /// Whether every connection has closed since `stop()`.
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// End the threads (a second at most for the tasks in them), without the GIL.
    pub fn close(&self, py: Python<'_>) {
        self.stop();
        let runtime = self.runtime.lock().expect("runtime").take();
        if let Some(runtime) = runtime {
            py.detach(|| runtime.shutdown_timeout(Duration::from_secs(1)));
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.get_mut().ok().and_then(Option::take) {
            runtime.shutdown_background();
        }
    }
}
