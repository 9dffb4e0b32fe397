//! The OTLP/HTTP listener in native threads: HTTP/1.1 in hyper, off the GIL and off the event
//! loop, for the one call whose latency an agent waits on: `POST /v1/guard`.
//!
//! On aiohttp a guard call cost the event loop about 600 µs and waited behind every other
//! request there, so its p99 was 20-35 ms beside ingest. Here a guard call about a run the
//! guard keeps natively is read, weighed and answered in these threads (guard_listen.rs), as
//! the gRPC listener answers `GuardService/Check`; the loop only records the guard's step
//! afterwards. Every other request (exports, a guard call this side cannot answer exactly as
//! Python would, a wrong path or method) is read whole here, up to the request size limit, and
//! handed to the loop with its method, path, headers and peer, and answered as Python says.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio::sync::oneshot;

use crate::guard_judge::{GuardCore, GuardRuns};
use crate::listener::{bind, runtime, Handover, Serving};

const GUARD: &str = "/v1/guard";
const IDLE: Duration = Duration::from_secs(75);

/// A request waiting for Python. `body` is None when it passed the size limit unread.
struct Call {
    id: u64,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Bytes>,
    peer: String,
    arrived: Instant,
}

/// Python's answer: status, headers and body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Bytes,
}

struct Shared {
    calls: Handover<Call, Answer>,
    /// The guard's kept runs, when it answers `POST /v1/guard` in these threads.
    native_guard: OnceLock<Arc<GuardCore>>,
    max_request_bytes: usize,
}

fn text(value: &http::HeaderValue) -> String {
    String::from_utf8_lossy(value.as_bytes()).into_owned()
}

/// Whether the request is a guard call this side may answer: JSON, not compressed (a
/// compressed body, or another media type, is Python's to read or refuse).
fn plain_json(headers: &HeaderMap) -> bool {
    let header = |name| headers.get(name).map(text).unwrap_or_default();
    let media = header(CONTENT_TYPE);
    let media = media.split(';').next().unwrap_or("").trim();
    let encoding = header(CONTENT_ENCODING);
    let encoding = encoding.trim();
    media.eq_ignore_ascii_case("application/json")
        && (encoding.is_empty() || encoding.eq_ignore_ascii_case("identity"))
}

fn respond(status: u16, headers: Vec<(String, String)>, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let map = response.headers_mut();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes());
        let value = http::HeaderValue::from_str(&value);
        if let (Ok(name), Ok(value)) = (name, value) {
            map.append(name, value);
        }
    }
    response
}

fn plain_text(status: u16, message: &str) -> Response<Full<Bytes>> {
    let media = (
        "Content-Type".to_owned(),
        "text/plain; charset=utf-8".to_owned(),
    );
    respond(status, vec![media], Bytes::from(message.to_owned()))
}

/// One request: a guard call answered here, anything else answered by Python.
async fn serve(
    shared: Arc<Shared>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let arrived = Instant::now();
    let (parts, body) = request.into_parts();
    let limit = shared.max_request_bytes;
    let declared = parts.headers.get(CONTENT_LENGTH).map(text);
    let declared = declared.and_then(|d| d.trim().parse::<u64>().ok());
    // Past the limit by its Content-Length it is not read: Python says why it is refused.
    let body = match declared.is_some_and(|d| d > limit as u64) {
        true => None,
        false => match Limited::new(body, limit).collect().await {
            Ok(collected) => Some(collected.to_bytes()),
            Err(e) if e.is::<LengthLimitError>() => None,
            Err(e) => return Ok(plain_text(400, &format!("request body not read: {e}"))),
        },
    };
    let path = parts.uri.path();
    if let (true, Some(core), Some(body)) = (
        parts.method == Method::POST && path == GUARD && plain_json(&parts.headers),
        shared.native_guard.get(),
        body.as_ref(),
    ) {
        let authorization = parts.headers.get("authorization").map(text);
        if let Some(answer) = core.answer_json(body, authorization.as_deref(), arrived) {
            let media = ("Content-Type".to_owned(), "application/json".to_owned());
            return Ok(respond(200, vec![media], Bytes::from(answer)));
        }
    }
    let headers = parts.headers.iter();
    let headers = headers
        .map(|(k, v)| (k.as_str().to_owned(), text(v)))
        .collect();
    let (id, answered) = shared.calls.hand_over(|id| Call {
        id,
        method: parts.method.as_str().to_owned(),
        path: path.to_owned(),
        headers,
        body,
        peer: peer.ip().to_string(),
        arrived,
    });
    Ok(match shared.calls.answer(id, answered).await {
        Some(a) => respond(a.status, a.headers, a.body),
        None => plain_text(503, "the collector is shutting down"),
    })
}

/// Accept connections until `stopping`, then let every connection finish the request it is
/// in (idle ones are closed) before `done` is set.
async fn accept(
    shared: Arc<Shared>,
    listener: tokio::net::TcpListener,
    mut stopping: oneshot::Receiver<()>,
    done: Arc<AtomicBool>,
) {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // A connection idle (or sending its headers) this long is closed, as aiohttp's keep-alive
    // timeout closes it.
    http.timer(TokioTimer::new()).header_read_timeout(IDLE);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => {
                    // Out of descriptors, or a connection reset before it was accepted.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = &mut stopping => break,
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let service = service_fn(move |request| serve(shared.clone(), peer, request));
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(connection);
    }
    drop(listener);
    graceful.shutdown().await;
    done.store(true, Ordering::SeqCst);
}

/// A request as Python takes it (see `take`).
type Taken<'py> = (
    u64,
    String,
    String,
    Vec<(String, String)>,
    Option<Bound<'py, PyBytes>>,
    String,
    f64,
);

/// The listener, its runtime and the requests between it and Python.
#[pyclass(module = "collector.normalize._native")]
pub struct HttpServer {
    shared: Arc<Shared>,
    serving: Serving,
    #[pyo3(get)]
    port: u16,
}

#[pymethods]
impl HttpServer {
    /// Bind `host:port` (0: any free port) and serve on `threads` threads named
    /// `sextant-http`; `wake_fd` is the write end of a non-blocking pipe, owned from now on.
    #[new]
    fn new(
        host: &str,
        port: u16,
        threads: usize,
        wake_fd: i32,
        max_request_bytes: usize,
    ) -> PyResult<Self> {
        let calls = Handover::new(wake_fd);
        let (listener, port) = bind(host, port)?;
        let runtime = runtime(threads, "sextant-http")?;
        let shared = Arc::new(Shared {
            calls,
            native_guard: OnceLock::new(),
            max_request_bytes,
        });
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|e| PyOSError::new_err(e.to_string()))?
        };
        let (serving, stopping, stopped) = Serving::new(runtime);
        serving.spawn(accept(shared.clone(), listener, stopping, stopped));
        Ok(HttpServer {
            shared,
            serving,
            port,
        })
    }

    /// The requests that arrived since the last take, each as (id, method, path, headers,
    /// body or None when it passed the size limit, peer address, seconds since it arrived).
    /// Clears the wake-up first, so a request queued meanwhile wakes the loop again.
    fn take<'py>(&self, py: Python<'py>) -> Vec<Taken<'py>> {
        let calls = self.shared.calls.take();
        calls
            .into_iter()
            .map(|c| {
                let age = c.arrived.elapsed().as_secs_f64();
                let body = c.body.map(|b| PyBytes::new(py, &b));
                (c.id, c.method, c.path, c.headers, body, c.peer, age)
            })
            .collect()
    }

    /// Answer request `id` with `status`, `headers` and `body`; one whose client left is
    /// ignored.
    fn reply(&self, id: u64, status: u16, headers: Vec<(String, String)>, body: &[u8]) {
        let body = Bytes::copy_from_slice(body);
        let answer = Answer {
            status,
            headers,
            body,
        };
        self.shared.calls.reply(id, answer);
    }

    /// Answer `POST /v1/guard` in these threads for the runs `runs` keeps (the others are
    /// still handed to Python); once per server.
    fn answer_guard_calls(&self, runs: &GuardRuns) {
        let _ = self.shared.native_guard.set(runs.core());
    }

    /// Stop taking connections; calls in flight are still answered.
    fn stop(&self) {
        self.serving.stop();
    }

    /// Whether every connection has closed since `stop()`.
    fn stopped(&self) -> bool {
        self.serving.stopped()
    }

    /// End the threads; requests not yet answered get 503.
    fn close(&self, py: Python<'_>) {
        self.serving.close(py);
        self.shared.calls.close();
    }
}
