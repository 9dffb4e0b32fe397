"""TLS on OTLP/gRPC, OTLP/HTTP and the admin port: the OTel SDK exporters over TLS with a
client certificate, clients without one refused, renewed files served without a restart."""

from __future__ import annotations

import socket
import ssl

import grpc
import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.cli import sextant
from tests.support.otlp import TRACE_EXPORT, simple_spans, trace_request
from tests.support.server import RunningServer, start_server
from tests.support.tls import Certificates, install, make_certificates
from tests.support.wait import wait_for

GRPC_ENV = {
    "certificate": "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "client_certificate": "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
    "client_key": "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
}


def finished_spans(service: str) -> list:
    """Two spans of one run, ended, as an exporter is handed them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tls-test")
    with tracer.start_as_current_span("invoke_agent"), tracer.start_as_current_span("tool"):
        pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def sdk_exporter(server: RunningServer, protocol: str, certs: Certificates, monkeypatch, client):
    """The SDK's exporter for `protocol`, trusting the CA, with the client certificate or not."""
    if protocol == "http":
        pair = certs.client_pair if client else (None, None)
        return HttpSpanExporter(
            endpoint=f"{server.http_url}/v1/traces",
            certificate_file=str(certs.ca),
            client_certificate_file=pair[0],
            client_key_file=pair[1],
            timeout=3,
        )
    # The gRPC exporter takes its certificate files from the environment only.
    monkeypatch.setenv(GRPC_ENV["certificate"], str(certs.ca))
    if client:
        monkeypatch.setenv(GRPC_ENV["client_certificate"], certs.client_pair[0])
        monkeypatch.setenv(GRPC_ENV["client_key"], certs.client_pair[1])
    else:
        monkeypatch.delenv(GRPC_ENV["client_certificate"], raising=False)
        monkeypatch.delenv(GRPC_ENV["client_key"], raising=False)
    return GrpcSpanExporter(endpoint=server.grpc_endpoint, insecure=False, timeout=3)


@pytest.fixture(autouse=True)
def no_ca_bundle_override(monkeypatch):
    """requests lets $REQUESTS_CA_BUNDLE / $CURL_CA_BUNDLE replace the CA file the HTTP exporter
    sets on its session; a machine that sets them would hide the exporter's own setting."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


@pytest.fixture
def certs(tmp_path) -> Certificates:
    return make_certificates(tmp_path)


@pytest.fixture
def mutual(tmp_path, certs):
    """Both receivers require a client certificate signed by the test CA."""
    tls = certs.tls(require_client_cert=True)
    server = start_server(tmp_path / "data", grpc={"tls": tls}, http={"tls": tls})
    yield server
    server.stop()


def stored(server: RunningServer, service: str) -> int:
    sql = "SELECT count(*) FROM spans WHERE service_name = ?"
    return server.query(sql, [service])[0][0]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_an_sdk_exporter_sends_over_tls_with_a_client_certificate(
    mutual, certs, protocol, monkeypatch
):
    exporter = sdk_exporter(mutual, protocol, certs, monkeypatch, client=True)
    assert exporter.export(finished_spans(f"tls-{protocol}")) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert stored(mutual, f"tls-{protocol}") == 2


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_client_without_a_certificate_is_refused(mutual, certs, protocol, monkeypatch):
    exporter = sdk_exporter(mutual, protocol, certs, monkeypatch, client=False)
    assert exporter.export(finished_spans(f"nocert-{protocol}")) == SpanExportResult.FAILURE
    exporter.shutdown()
    plain = trace_request(simple_spans(1)).SerializeToString()
    if protocol == "http":  # nor does plain text reach it
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.post(mutual.http_url.replace("https", "http") + "/v1/traces", data=plain)
    else:
        with grpc.insecure_channel(mutual.grpc_endpoint) as channel, pytest.raises(grpc.RpcError):
            channel.unary_unary(TRACE_EXPORT)(plain, timeout=3)
    assert stored(mutual, f"nocert-{protocol}") == 0


def test_the_admin_port_over_tls_takes_the_token_or_a_client_certificate(
    tmp_path, certs, capsys, monkeypatch
):
    server = start_server(
        tmp_path / "data", admin={"tls": certs.tls()}, auth={"tokens": ["adm1n-0123456789ab"]}
    )
    try:
        url, ca = server.admin_url, str(certs.ca)
        assert url.startswith("https://")
        for path in ("/metrics", "/healthz", "/readyz"):  # open by design, no certificate asked
            assert requests.get(url + path, verify=ca, timeout=5).status_code == 200
        reads = f"{url}/api/v1/trajectories"
        assert requests.get(reads, verify=ca, timeout=5).status_code == 401
        token = {"Authorization": "Bearer adm1n-0123456789ab"}
        assert requests.get(reads, verify=ca, headers=token, timeout=5).status_code == 200
        reply = requests.get(reads, verify=ca, cert=certs.client_pair, timeout=5)
        assert reply.status_code == 200
        with pytest.raises(requests.exceptions.SSLError):  # a client that does not trust it
            requests.get(url + "/healthz", timeout=5)
        monkeypatch.setenv("SSL_CERT_FILE", ca)  # what the CLI trusts, as OpenSSL reads it
        code, out = sextant(capsys, "trajectories", "--url", url, "--token", "adm1n-0123456789ab")
        assert code == 0, out
    finally:
        server.stop()


def served_certificate(port: int, ca) -> bytes | None:
    """The certificate a new TLS connection to `port` gets, if `ca` trusts it."""
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=3) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            return tls.getpeercert(binary_form=True)
    except ssl.SSLError:
        return None


def grpc_accepts(server: RunningServer, ca) -> bool:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
    body = trace_request(simple_spans(1)).SerializeToString()
    with grpc.secure_channel(server.grpc_endpoint, credentials) as channel:
        try:
            channel.unary_unary(TRACE_EXPORT)(body, timeout=3)
        except grpc.RpcError:
            return False
    return True


def test_renewed_certificate_files_are_served_without_a_restart(tmp_path, certs):
    tls = certs.tls(client_ca=False)
    server = start_server(
        tmp_path / "data", grpc={"tls": tls}, http={"tls": tls}, admin={"tls": tls}
    )
    try:
        ports = [server.pipeline.http.port, server.pipeline.admin.port]
        for port in ports:
            assert served_certificate(port, certs.ca) is not None
        assert grpc_accepts(server, certs.ca)
        renewed = make_certificates(tmp_path, "renewed")  # another CA: nothing old trusts it
        install(renewed, certs)
        for port in ports:
            wait_for(lambda port=port: served_certificate(port, renewed.ca), timeout=10)
            assert served_certificate(port, certs.ca) is None
        wait_for(lambda: grpc_accepts(server, renewed.ca), timeout=10)
        assert not grpc_accepts(server, certs.ca)
        # a half-written renewal (a key that does not match) is refused; the last good one stays
        certs.key.write_bytes(make_certificates(tmp_path, "other").key.read_bytes())
        for port in ports:
            for _ in range(3):
                assert served_certificate(port, renewed.ca) is not None
    finally:
        server.stop()
