//! An HTTP/1.1 POST load from one native thread, for `scripts/benchmark-guard --protocol http`.
//!
//! The benchmark measures a guard call from when it was due, on a machine whose two cores the
//! client shares with the collector. Python's asyncio client was itself late: at 1,000 calls a
//! second its calls left p99 8 ms after they were due, before the collector saw them
//! (docs/performance.md). This client sends from a tokio runtime with the GIL released, over
//! `connections` keep-alive connections (hyper), one call at a time on each: a call due while
//! every connection is busy waits for the first free one, and that wait counts.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, HOST};
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{handshake, SendRequest};
use hyper_util::rt::TokioIo;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio::net::TcpStream;

use crate::load_schedule::{gather, on_main_thread, runtime, Schedule};

/// The run, shared by its connections.
struct Plan {
    address: String,
    path: String,
    bodies: Vec<Bytes>,
    headers: Vec<(HeaderName, HeaderValue)>,
    timeout: Duration,
    schedule: Schedule,
}

/// One finished call: seconds from when it was due, HTTP status (0: no answer), why not, body.
/// A call's number, and (seconds from when it was due, status, why not, answer).
type Finished = (u64, (f64, u16, String, Option<Bytes>));

impl Plan {
    /// The call's request; hyper sets its Content-Length from the body.
    fn request(&self, body: Bytes) -> Result<Request<Full<Bytes>>, String> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(self.path.as_str())
            .header(HOST, self.address.as_str());
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request.body(Full::new(body)).map_err(|e| e.to_string())
    }

    /// One call on `connection`, opened first when there is none (or the last one failed).
    async fn call(
        &self,
        connection: &mut Option<SendRequest<Full<Bytes>>>,
        body: Bytes,
    ) -> Result<(u16, Bytes), String> {
        let sender = match connection.take().filter(|open| !open.is_closed()) {
            Some(open) => connection.insert(open),
            None => connection.insert(self.connect().await.map_err(|e| e.to_string())?),
        };
        sender.ready().await.map_err(|e| e.to_string())?;
        let response = sender
            .send_request(self.request(body)?)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok((status, body.to_bytes()))
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, Box<dyn std::error::Error>> {
        let stream = TcpStream::connect(self.address.as_str()).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection); // ends when the sender is dropped or the server closes
        Ok(sender)
    }
}

/// One connection's calls, one at a time, until the run is over.
async fn send(plan: Arc<Plan>) -> Vec<Finished> {
    let mut connection = None;
    let mut calls = Vec::new();
    while let Some((n, due)) = plan.schedule.next_call().await {
        let body = plan.bodies[(n % plan.bodies.len() as u64) as usize].clone();
        let outcome = tokio::time::timeout(plan.timeout, plan.call(&mut connection, body)).await;
        let latency = due.elapsed().as_secs_f64();
        let finished = match outcome {
            Ok(Ok((status, reply))) => (latency, status, String::new(), Some(reply)),
            Ok(Err(message)) => {
                connection = None;
                (latency, 0, message, None)
            }
            Err(_) => {
                connection = None; // its answer may still come: the next call opens another
                (latency, 0, "timed out".to_owned(), None)
            }
        };
        calls.push((n, finished));
    }
    calls
}

fn header(name: &str, value: &str) -> PyResult<(HeaderName, HeaderValue)> {
    let bad = |what: &str| PyValueError::new_err(format!("{name:?}: not a header {what}"));
    Ok((
        HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("name"))?,
        HeaderValue::from_str(value).map_err(|_| bad("value"))?,
    ))
}

/// A call as Python gets it: (seconds from when it was due, HTTP status or 0 when there was no
/// answer, why not, the answer's body or None).
type CallTuple<'py> = (f64, u16, String, Option<Bound<'py, PyBytes>>);

/// POSTs `bodies` in turn to `path` at `address` ("host:port", plaintext HTTP/1.1) for
/// `duration` seconds or `requests` calls (0: no budget), closed loop or at `rate` calls a
/// second (open loop), over `connections` keep-alive connections, with the GIL released.
#[pyfunction]
#[pyo3(signature = (
    address, path, *, bodies, connections=1, duration, requests=0, rate=0.0,
    headers=Vec::new(), timeout=10.0, threads=1,
))]
#[allow(clippy::too_many_arguments)]
pub fn http_load<'py>(
    py: Python<'py>,
    address: &str,
    path: &str,
    bodies: Vec<Bound<'py, PyBytes>>,
    connections: usize,
    duration: f64,
    requests: u64,
    rate: f64,
    headers: Vec<(String, String)>,
    timeout: f64,
    threads: usize,
) -> PyResult<Vec<CallTuple<'py>>> {
    if bodies.is_empty() {
        return Err(PyValueError::new_err("give at least one body"));
    }
    if !(duration.is_finite() && duration >= 0.0 && timeout.is_finite() && timeout > 0.0) {
        return Err(PyValueError::new_err("duration and timeout are seconds"));
    }
    let headers = headers
        .iter()
        .map(|(name, value)| header(name, value))
        .collect::<PyResult<Vec<_>>>()?;
    let bodies = bodies
        .iter()
        .map(|b| Bytes::copy_from_slice(b.as_bytes()))
        .collect();
    let on_main_thread = on_main_thread(py)?;
    let runtime = runtime(threads)?;
    let result = py.detach(|| {
        runtime.block_on(async {
            let plan = Arc::new(Plan {
                address: address.to_owned(),
                path: path.to_owned(),
                bodies,
                headers,
                timeout: Duration::from_secs_f64(timeout),
                schedule: Schedule::new(rate, requests, duration),
            });
            let mut senders = tokio::task::JoinSet::new();
            for _ in 0..connections.max(1) {
                senders.spawn(send(plan.clone()));
            }
            gather(&plan.schedule, senders, on_main_thread).await
        })
    });
    py.detach(|| runtime.shutdown_timeout(Duration::from_secs(1)));
    let mut finished: Vec<Finished> = result?.into_iter().flatten().collect();
    finished.sort_unstable_by_key(|(n, _)| *n); // in the order they were due
    Ok(finished
        .into_iter()
        .map(|(_, (latency, status, message, body))| {
            (latency, status, message, body.map(|b| PyBytes::new(py, &b)))
        })
        .collect())
}
