"""TLS for the listeners: server contexts from certificate files, taken up again when they change.

A certificate renewed on disk (cert-manager, an ACME client) is served from the next handshake
on, without a restart: the files' modification times are looked at, at most once a second, when
a client connects. A new set that does not load (a half-written key) is logged and the previous
one stays in force.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from collector.config.sections import TlsConfig
from collector.errors import StartupError

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0
T = TypeVar("T")


class CertificateFiles:
    """One listener's `tls` files, and whether they changed since the last set that loaded."""

    def __init__(self, config: TlsConfig, what: str) -> None:
        self.config = config
        self.what = what
        self._lock = threading.Lock()
        self._loaded = self.stamp()
        self._refused: tuple[int, ...] | None = None
        self._checked = time.monotonic()

    def paths(self) -> list[Path]:
        found = [self.config.cert_file, self.config.key_file, self.config.client_ca_file]
        return [p for p in found if p is not None]

    def stamp(self) -> tuple[int, ...]:
        return tuple(n for p in self.paths() for n in (p.stat().st_mtime_ns, p.stat().st_size))

    def reload(self, build: Callable[[], T]) -> T | None:
        """`build()` once the files have changed (and load); None while they are unchanged."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked < CHECK_SECONDS:
                return None
            self._checked = now
            try:
                stamp = self.stamp()
            except OSError:
                return None  # a file being replaced: look again at the next handshake
            if stamp in (self._loaded, self._refused):
                return None
            try:
                built = build()
            except (OSError, ssl.SSLError) as exc:
                self._refused = stamp
                log.warning("%s: new TLS files do not load, keeping the old: %s", self.what, exc)
                return None
            self._loaded = stamp
            log.info("%s: TLS certificate files reloaded", self.what)
            return built


def server_context(config: TlsConfig) -> ssl.SSLContext:
    """A TLS 1.2+ server context; client certificates verified when client_ca_file is given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(config.cert_file, config.key_file)
    if config.client_ca_file is not None:
        context.load_verify_locations(cafile=config.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED if config.require_client_cert else ssl.CERT_OPTIONAL
    return context


def at_start(build: Callable[[], T], what: str) -> T:
    try:
        return build()
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(f"{what}: cannot load the TLS files: {exc}") from exc


def reloading_context(config: TlsConfig, what: str) -> ssl.SSLContext:
    """The context to listen with (aiohttp); each handshake switches to the newest files' context.

    Switching happens in the ClientHello callback (`sni_callback`, called with or without SNI):
    the connection takes the new context's certificate and CA store before either is used.
    """
    base = at_start(lambda: server_context(config), what)
    files = at_start(lambda: CertificateFiles(config, what), what)
    current = [base]

    def switch(connection: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        fresh = files.reload(lambda: server_context(config))
        if fresh is not None:
            current[0] = fresh
        if current[0] is not base:
            connection.context = current[0]

    base.sni_callback = switch
    return base


def grpc_certificates(config: TlsConfig) -> Any:
    server_context(config)  # the checks grpc would only make at the first handshake
    ca = config.client_ca_file.read_bytes() if config.client_ca_file else None
    pair = (config.key_file.read_bytes(), config.cert_file.read_bytes())
    return grpc.ssl_server_certificate_configuration([pair], root_certificates=ca)


def grpc_credentials(config: TlsConfig, what: str) -> grpc.ServerCredentials:
    """gRPC server credentials whose certificate configuration grpc fetches again at each new
    connection (`dynamic_ssl_server_credentials`): the newest files, once they load."""
    initial = at_start(lambda: grpc_certificates(config), what)
    files = at_start(lambda: CertificateFiles(config, what), what)
    return grpc.dynamic_ssl_server_credentials(
        initial,
        lambda: files.reload(lambda: grpc_certificates(config)),
        require_client_authentication=config.require_client_cert,
    )
