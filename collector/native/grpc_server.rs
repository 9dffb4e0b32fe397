//! The OTLP/gRPC listener in native threads: HTTP/2, gRPC framing and gzip in tonic, off the
//! GIL; each call's bytes are handed to Python's event loop in batches, and its answer back.
//!
//! Python's gRPC server costs the event loop about 360 µs a call before a handler runs, so
//! 10-span requests from many exporters are bounded by the server, not by the work. Here a call
//! costs the loop only what Python does with it: the calls that arrived since the loop last
//! looked are taken with one `take()`, woken by one byte on a pipe the loop watches, and each is
//! answered with `reply()`. A guard call about a run the guard keeps natively is answered here
//! instead (guard_listen.rs), and only the guard's step is left to the loop; these threads
//! take the GIL only for such a run's first call and for a decision not remembered.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tonic::codec::CompressionEncoding;
use tonic::server::{Grpc, UnaryService};
use tonic::transport::server::{TcpConnectInfo, TcpIncoming};
use tonic::{Code, Status};

use crate::guard_judge::{GuardCore, GuardRuns};
use crate::listener::{bind, runtime, Handover, Serving};
use crate::raw_codec::Raw;

const TRACES: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
const LOGS: &str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";
const GUARD: &str = "/sextant.guard.v1.GuardService/Check";

/// A call's method, as Python is told it.
#[derive(Clone, Copy)]
enum Method {
    Traces = 0,
    Logs = 1,
    Guard = 2,
}

/// A call waiting for Python: its bytes and what of its metadata Python reads.
struct Call {
    id: u64,
    method: Method,
    body: Bytes,
    authorization: Option<String>,
    user_agent: Option<String>,
    peer: String,
    arrived: Instant,
}

/// Python's answer: gRPC status code (0: OK, with `body`), message and status details.
struct Answer {
    code: i32,
    message: String,
    body: Bytes,
    details: Bytes,
}

struct Shared {
    calls: Handover<Call, Answer>,
    guard: bool,
    /// The guard's kept runs, when it answers calls in these threads (guard_listen.rs).
    native_guard: OnceLock<Arc<GuardCore>>,
    max_request_bytes: usize,
    max_response_bytes: usize,
}

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One unary call: handed to Python, answered when Python replies.
struct Unary {
    shared: Arc<Shared>,
    method: Method,
    peer: String,
}

impl UnaryService<Bytes> for Unary {
    type Response = Bytes;
    type Future = Boxed<Result<tonic::Response<Bytes>, Status>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let shared = self.shared.clone();
        let text = |name: &str| {
            let value = request.metadata().get(name)?;
            value.to_str().ok().map(str::to_owned)
        };
        let authorization = text("authorization");
        if let (Method::Guard, Some(guard)) = (self.method, shared.native_guard.get()) {
            let arrived = Instant::now();
            if let Some(answer) =
                guard.answer_call(request.get_ref(), authorization.as_deref(), arrived)
            {
                return Box::pin(async move { Ok(tonic::Response::new(Bytes::from(answer))) });
            }
        }
        let user_agent = text("user-agent");
        let method = self.method;
        let peer = std::mem::take(&mut self.peer);
        let (id, answered) = shared.calls.hand_over(|id| Call {
            id,
            method,
            body: request.into_inner(),
            authorization,
            user_agent,
            peer,
            arrived: Instant::now(),
        });
        Box::pin(async move {
            let Some(answer) = shared.calls.answer(id, answered).await else {
                return Err(Status::unavailable("the collector is shutting down"));
            };
            if answer.code == 0 {
                return Ok(tonic::Response::new(answer.body));
            }
            Err(Status::with_details(
                Code::from(answer.code),
                answer.message,
                answer.details,
            ))
        })
    }
}

/// "ipv4:127.0.0.1:5000" or "ipv6:[::1]:5000", as gRPC names a peer.
fn peer_name(addr: Option<SocketAddr>) -> String {
    match addr {
        Some(SocketAddr::V4(a)) => format!("ipv4:{a}"),
        Some(SocketAddr::V6(a)) => format!("ipv6:{a}"),
        None => "unknown".to_owned(),
    }
}

/// Routes a call by its path; any other method is UNIMPLEMENTED, as gRPC servers answer.
#[derive(Clone)]
struct Routes(Arc<Shared>);

impl tower_service::Service<http::Request<tonic::body::Body>> for Routes {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Boxed<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let shared = self.0.clone();
        let method = match request.uri().path() {
            TRACES => Some(Method::Traces),
            LOGS => Some(Method::Logs),
            GUARD if shared.guard => Some(Method::Guard),
            _ => None,
        };
        let peer = request
            .extensions()
            .get::<TcpConnectInfo>()
            .and_then(TcpConnectInfo::remote_addr);
        Box::pin(async move {
            let Some(method) = method else {
                return Ok(Status::unimplemented("").into_http());
            };
            let mut grpc = Grpc::new(Raw)
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(shared.max_request_bytes)
                .max_encoding_message_size(shared.max_response_bytes);
            let unary = Unary {
                shared,
                method,
                peer: peer_name(peer),
            };
            Ok(too_large_is_resource_exhausted(
                grpc.unary(unary, request).await,
            ))
        })
    }
}

/// tonic refuses a message over the size limit with OUT_OF_RANGE, which OTLP exporters retry
/// as transient: the same request, for ever. gRPC's own servers and the OTLP specification
/// answer RESOURCE_EXHAUSTED, not retried without RetryInfo. Python never answers
/// OUT_OF_RANGE, so the status is tonic's limit wherever it appears.
fn too_large_is_resource_exhausted(
    mut response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let status = response.headers_mut().get_mut("grpc-status");
    if let Some(status) = status.filter(|s| s.as_bytes() == b"11") {
        *status = http::HeaderValue::from_static("8");
    }
    response
}

/// A call as Python takes it (see `take`).
type Taken<'py> = (
    u64,
    u8,
    Bound<'py, PyBytes>,
    Option<String>,
    Option<String>,
    String,
    f64,
);

/// The listener, its runtime and the calls between it and Python.
#[pyclass(module = "collector.normalize._native")]
pub struct GrpcServer {
    shared: Arc<Shared>,
    serving: Serving,
    #[pyo3(get)]
    port: u16,
}

#[pymethods]
impl GrpcServer {
    /// Bind `host:port` (0: any free port) and serve on `threads` threads named
    /// `sextant-grpc`; `wake_fd` is the write end of a non-blocking pipe, owned from now on.
    #[new]
    #[pyo3(signature = (host, port, threads, wake_fd, guard, max_request_bytes, max_response_bytes))]
    fn new(
        host: &str,
        port: u16,
        threads: usize,
        wake_fd: i32,
        guard: bool,
        max_request_bytes: usize,
        max_response_bytes: usize,
    ) -> PyResult<Self> {
        let calls = Handover::new(wake_fd);
        let (listener, port) = bind(host, port)?;
        let runtime = runtime(threads, "sextant-grpc")?;
        let shared = Arc::new(Shared {
            calls,
            guard,
            native_guard: OnceLock::new(),
            max_request_bytes,
            max_response_bytes,
        });
        let incoming = {
            let _entered = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| PyOSError::new_err(e.to_string()))?;
            TcpIncoming::from(listener).with_nodelay(Some(true))
        };
        let routes = Routes(shared.clone());
        let (serving, stopping, done) = Serving::new(runtime);
        serving.spawn(async move {
            let serve = tonic::transport::Server::builder().serve_with_incoming_shutdown(
                routes,
                incoming,
                async {
                    let _ = stopping.await;
                },
            );
            if let Err(e) = serve.await {
                eprintln!("sextant: OTLP/gRPC server stopped: {e}");
            }
            done.store(true, Ordering::SeqCst);
        });
        Ok(GrpcServer {
            shared,
            serving,
            port,
        })
    }

    /// The calls that arrived since the last take, each as (id, method: 0 traces, 1 logs,
    /// 2 guard, body, authorization, user agent, peer, seconds since it arrived). Clears the
    /// wake-up first, so a call queued meanwhile wakes the loop again.
    fn take<'py>(&self, py: Python<'py>) -> Vec<Taken<'py>> {
        self.shared
            .calls
            .take()
            .into_iter()
            .map(|c| {
                let age = c.arrived.elapsed().as_secs_f64();
                let body = PyBytes::new(py, &c.body);
                (
                    c.id,
                    c.method as u8,
                    body,
                    c.authorization,
                    c.user_agent,
                    c.peer,
                    age,
                )
            })
            .collect()
    }

    /// Answer call `id`: `code` 0 with `body`, or a gRPC status with `message` and
    /// `details` (a serialized google.rpc.Status). A call whose client left is ignored.
    #[pyo3(signature = (id, code, body, message="", details=b"".as_slice()))]
    fn reply(&self, id: u64, code: i32, body: &[u8], message: &str, details: &[u8]) {
        let answer = Answer {
            code,
            message: message.to_owned(),
            body: Bytes::copy_from_slice(body),
            details: Bytes::copy_from_slice(details),
        };
        self.shared.calls.reply(id, answer);
    }

    /// Answer `GuardService/Check` in these threads for the runs `runs` keeps (the others
    /// are still handed to Python); once per server.
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

    /// End the threads; calls not yet answered fail with UNAVAILABLE.
    fn close(&self, py: Python<'_>) {
        self.serving.close(py);
        self.shared.calls.close();
    }
}
