//! A gRPC unary load from one native thread, for `sextant bench` over OTLP/gRPC and
//! `scripts/benchmark-guard --protocol grpc`.
//!
//! The load generator shares the cores it measures. From Python, grpcio with a thread an
//! exporter cost 28-38 µs of CPU a span for 10-span requests from 64 exporters (a quarter to a
//! third of a 2-core machine) and a `grpc.aio` client about 355 µs a guard call; this client
//! 6-8 µs and about 100 (docs/performance.md). The calls run on a tokio runtime of their own
//! (the calling thread, by default) with the GIL released: HTTP/2 and gRPC framing in tonic,
//! each body a copy of a template with a fresh salt and the time of sending (`fresh_copy.rs`),
//! or one of fixed bodies in turn. Each of `connections` HTTP/2 connections carries `in_flight`
//! calls at a time (1: as an SDK exporter sends), closed loop or open loop at a request rate.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tonic::client::Grpc;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::fresh_copy::{FreshCopies, Template};
use crate::load_schedule::{gather, on_main_thread, runtime, Schedule};
use crate::raw_codec::Raw;

/// tonic's message when its own deadline (from `grpc-timeout`) ends a call.
const TIMEOUT_EXPIRED: &str = "Timeout expired";

/// What the calls send.
enum Bodies {
    /// Fixed bodies, call n sending body n modulo their number.
    Fixed(Vec<Bytes>),
    /// A fresh copy of an export request for every call.
    Fresh(Arc<Template>),
}

/// What Python gets of an OK call's answer.
enum Reply {
    Bytes(Bytes),
    RejectedSpans(i64),
}

/// One finished call: its number, seconds from when it was due, gRPC status code, message,
/// answer.
struct Finished {
    n: u64,
    latency: f64,
    code: i32,
    message: String,
    reply: Option<Reply>,
}

/// A sender's calls, the refusals it retried, and the refusal it gave up on (whose wait
/// outlasted the run: sending at once would only be refused again, as an SDK exporter knows).
#[derive(Default)]
struct Sent {
    calls: Vec<Finished>,
    retried: u64,
    gave_up: Option<i32>,
}

/// The run, shared by its senders.
struct Plan {
    path: http::uri::PathAndQuery,
    bodies: Bodies,
    metadata: MetadataMap,
    timeout: Duration,
    retry: bool,
    rejected_spans: bool,
    schedule: Schedule,
}

impl Plan {
    fn body(&self, n: u64, random: &mut SplitMix64) -> Bytes {
        match &self.bodies {
            Bodies::Fixed(bodies) => bodies[(n % bodies.len() as u64) as usize].clone(),
            Bodies::Fresh(template) => {
                let now_ns = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i64);
                Bytes::from(template.copy(random.next().to_le_bytes(), now_ns))
            }
        }
    }

    /// One call with the run's metadata and deadline; tonic's own end of the deadline is
    /// DEADLINE_EXCEEDED, as gRPC's clients say it.
    async fn call(&self, client: &mut Grpc<Channel>, body: Bytes) -> Result<Reply, Status> {
        let mut request = tonic::Request::new(body);
        *request.metadata_mut() = self.metadata.clone();
        request.set_timeout(self.timeout);
        let sent = async {
            client
                .ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            client.unary(request, self.path.clone(), Raw).await
        };
        let answer = match tokio::time::timeout(self.timeout, sent).await {
            Ok(Ok(answer)) => answer.into_inner(),
            Ok(Err(s)) if s.code() == Code::Cancelled && s.message() == TIMEOUT_EXPIRED => {
                return Err(Status::deadline_exceeded("Deadline Exceeded"))
            }
            Ok(Err(status)) => return Err(status),
            Err(_) => return Err(Status::deadline_exceeded("Deadline Exceeded")),
        };
        if !self.rejected_spans {
            return Ok(Reply::Bytes(answer));
        }
        let response = ExportTraceServiceResponse::decode(answer).map_err(|e| {
            Status::internal(format!(
                "the answer is not an ExportTraceServiceResponse: {e}"
            ))
        })?;
        let rejected = response.partial_success.map_or(0, |p| p.rejected_spans);
        Ok(Reply::RejectedSpans(rejected))
    }
}

/// One sender: calls one at a time over its connection until the run is over; with `retry`, a
/// refusal that says when (RetryInfo; UNAVAILABLE: a second) is sent again after that wait.
async fn send(plan: Arc<Plan>, channel: Channel, seed: u64) -> Sent {
    let mut client = Grpc::new(channel);
    let mut random = SplitMix64(seed);
    let mut sent = Sent::default();
    while let Some((n, due)) = plan.schedule.next_call().await {
        let body = plan.body(n, &mut random);
        loop {
            let (code, message, reply) = match plan.call(&mut client, body.clone()).await {
                Ok(reply) => (0, String::new(), Some(reply)),
                Err(status) => {
                    let delay = if plan.retry {
                        retry_delay(&status)
                    } else {
                        None
                    };
                    if let Some(delay) = delay {
                        if Instant::now() + delay >= plan.schedule.deadline {
                            sent.gave_up = Some(status.code() as i32);
                            return sent;
                        }
                        sent.retried += 1;
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    (status.code() as i32, status.message().to_owned(), None)
                }
            };
            sent.calls.push(Finished {
                n,
                latency: due.elapsed().as_secs_f64(),
                code,
                message,
                reply,
            });
            break;
        }
    }
    sent
}

/// google.rpc.Status, with only the details read here.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(message, repeated, tag = "3")]
    details: Vec<ProtoAny>,
}

/// google.protobuf.Any.
#[derive(Clone, PartialEq, prost::Message)]
struct ProtoAny {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// google.rpc.RetryInfo.
#[derive(Clone, PartialEq, prost::Message)]
struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    retry_delay: Option<ProtoDuration>,
}

/// google.protobuf.Duration.
#[derive(Clone, PartialEq, prost::Message)]
struct ProtoDuration {
    #[prost(int64, tag = "1")]
    seconds: i64,
    #[prost(int32, tag = "2")]
    nanos: i32,
}

/// The wait a refusal an OTLP exporter retries asks for, as `grpc_retry_delay` in
/// collector/bench/runner.py reads it: RESOURCE_EXHAUSTED with RetryInfo, UNAVAILABLE (a
/// second unless it says); None for any other.
fn retry_delay(status: &Status) -> Option<Duration> {
    if !matches!(status.code(), Code::ResourceExhausted | Code::Unavailable) {
        return None;
    }
    let details = RpcStatus::decode(status.details()).unwrap_or_default();
    let info = details.details.iter().find_map(|any| {
        let name = any.type_url.rsplit('/').next()?;
        (name == "google.rpc.RetryInfo")
            .then(|| RetryInfo::decode(any.value.as_slice()).ok())
            .flatten()
    });
    if let Some(info) = info {
        let delay = info.retry_delay.unwrap_or_default();
        let micros = i64::from(delay.nanos) / 1_000; // as protobuf's ToTimedelta rounds
        let seconds = delay.seconds as f64 + micros as f64 / 1e6;
        return Some(Duration::from_secs_f64(seconds.max(0.0)));
    }
    (status.code() == Code::Unavailable).then_some(Duration::from_secs(1))
}

/// A fast generator for the salts (trace ids need to be unique, not secret).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn metadata(headers: Vec<(String, String)>) -> PyResult<MetadataMap> {
    let mut map = MetadataMap::new();
    for (key, value) in headers {
        let name = MetadataKey::from_bytes(key.to_lowercase().as_bytes())
            .map_err(|_| PyValueError::new_err(format!("{key:?} is not a header name")))?;
        let value = MetadataValue::try_from(value.as_str())
            .map_err(|_| PyValueError::new_err(format!("the value of {key:?} is not ASCII")))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// Every sender's calls, until each is done (`in_flight` senders on each channel).
async fn run(
    plan: Arc<Plan>,
    channels: Vec<Channel>,
    in_flight: usize,
    on_main_thread: bool,
) -> PyResult<Vec<Sent>> {
    let seeds = std::collections::hash_map::RandomState::new();
    let mut senders = tokio::task::JoinSet::new();
    for (i, channel) in channels.iter().enumerate() {
        for j in 0..in_flight {
            let seed = seeds.hash_one((i, j));
            senders.spawn(send(plan.clone(), channel.clone(), seed));
        }
    }
    gather(&plan.schedule, senders, on_main_thread).await
}

/// A call as Python gets it: (seconds from when it was due, gRPC status code, message, the
/// answer's bytes or its rejected spans, None when it failed).
type CallTuple<'py> = (f64, i32, String, Option<Bound<'py, PyAny>>);

/// Calls `method` at `uri` ("http://host:port") for `duration` seconds or `requests` calls
/// (0: no budget) over `connections` HTTP/2 connections, `in_flight` calls at a time each,
/// closed loop or at `rate` calls a second (open loop), with the GIL released. Bodies are
/// `bodies` in turn, or a fresh copy of `template` each; `rejected_spans` decodes each answer
/// as an ExportTraceServiceResponse and keeps only `partial_success.rejected_spans`.
/// Returns (every call, refusals retried, the codes of the refusals senders gave up on).
#[pyfunction]
#[pyo3(signature = (
    uri, method, *, bodies=None, template=None, connections=1, in_flight=1, duration,
    requests=0, rate=0.0, headers=Vec::new(), timeout=10.0, retry=false, rejected_spans=false,
    threads=1,
))]
#[allow(clippy::too_many_arguments)]
pub fn grpc_load<'py>(
    py: Python<'py>,
    uri: &str,
    method: &str,
    bodies: Option<Vec<Bound<'py, PyBytes>>>,
    template: Option<PyRef<'py, FreshCopies>>,
    connections: usize,
    in_flight: usize,
    duration: f64,
    requests: u64,
    rate: f64,
    headers: Vec<(String, String)>,
    timeout: f64,
    retry: bool,
    rejected_spans: bool,
    threads: usize,
) -> PyResult<(Vec<CallTuple<'py>>, u64, Vec<i32>)> {
    let bodies = match (bodies, template) {
        (Some(bodies), None) if !bodies.is_empty() => Bodies::Fixed(
            bodies
                .iter()
                .map(|b| Bytes::copy_from_slice(b.as_bytes()))
                .collect(),
        ),
        (None, Some(template)) => Bodies::Fresh(template.template.clone()),
        _ => {
            return Err(PyValueError::new_err(
                "give bodies (not none) or a template",
            ))
        }
    };
    let path = method
        .parse()
        .map_err(|_| PyValueError::new_err(format!("{method:?} is not a gRPC method path")))?;
    let endpoint = Endpoint::from_shared(uri.to_owned())
        .map_err(|e| PyValueError::new_err(format!("{uri:?}: {e}")))?
        .tcp_nodelay(true);
    if !(duration.is_finite() && duration >= 0.0 && timeout.is_finite() && timeout > 0.0) {
        return Err(PyValueError::new_err("duration and timeout are seconds"));
    }
    let metadata = metadata(headers)?;
    let on_main_thread = on_main_thread(py)?;
    let runtime = runtime(threads)?;
    let result = py.detach(|| {
        runtime.block_on(async {
            let plan = Arc::new(Plan {
                path,
                bodies,
                metadata,
                timeout: Duration::from_secs_f64(timeout),
                retry,
                rejected_spans,
                schedule: Schedule::new(rate, requests, duration),
            });
            let channels = (0..connections.max(1))
                .map(|_| endpoint.connect_lazy())
                .collect();
            run(plan, channels, in_flight.max(1), on_main_thread).await
        })
    });
    py.detach(|| runtime.shutdown_timeout(Duration::from_secs(1)));
    let senders = result?;
    let (mut retried, mut gave_up, mut finished) = (0, Vec::new(), Vec::new());
    for sent in senders {
        retried += sent.retried;
        gave_up.extend(sent.gave_up);
        finished.extend(sent.calls);
    }
    finished.sort_unstable_by_key(|call| call.n); // in the order they were due
    let mut calls = Vec::with_capacity(finished.len());
    for call in finished {
        let reply = match call.reply {
            Some(Reply::Bytes(b)) => Some(PyBytes::new(py, &b).into_any()),
            Some(Reply::RejectedSpans(n)) => Some(n.into_pyobject(py)?.into_any()),
            None => None,
        };
        calls.push((call.latency, call.code, call.message, reply));
    }
    Ok((calls, retried, gave_up))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: Code, details: Vec<ProtoAny>) -> Status {
        let details = RpcStatus { details }.encode_to_vec();
        Status::with_details(code, "busy", details.into())
    }

    fn retry_info(seconds: i64, nanos: i32) -> ProtoAny {
        let info = RetryInfo {
            retry_delay: Some(ProtoDuration { seconds, nanos }),
        };
        ProtoAny {
            type_url: "type.googleapis.com/google.rpc.RetryInfo".into(),
            value: info.encode_to_vec(),
        }
    }

    #[test]
    fn retry_info_gives_the_wait() {
        let status = refusal(Code::ResourceExhausted, vec![retry_info(1, 250_000_000)]);
        assert_eq!(retry_delay(&status), Some(Duration::from_millis(1250)));
    }

    #[test]
    fn unavailable_without_retry_info_waits_a_second() {
        let status = refusal(Code::Unavailable, vec![]);
        assert_eq!(retry_delay(&status), Some(Duration::from_secs(1)));
    }

    #[test]
    fn other_refusals_are_not_retried() {
        assert_eq!(retry_delay(&refusal(Code::ResourceExhausted, vec![])), None);
        let status = refusal(Code::Unauthenticated, vec![retry_info(1, 0)]);
        assert_eq!(retry_delay(&status), None);
    }

    #[test]
    fn salts_differ() {
        let mut random = SplitMix64(7);
        let (a, b) = (random.next(), random.next());
        assert_ne!(a, b);
    }
}
