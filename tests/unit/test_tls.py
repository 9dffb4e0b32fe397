"""The `tls` blocks of the listeners: checked at load, and missing files refused at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.config import load_config
from collector.errors import ConfigError, StartupError
from collector.tls import reloading_context, server_context


def test_a_required_client_certificate_needs_the_ca_that_signs_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("grpc: {tls: {cert_file: s.pem, key_file: s.key, require_client_cert: true}}")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert "grpc.tls" in str(caught.value)
    assert "tls.require_client_cert needs tls.client_ca_file" in str(caught.value)


def test_missing_certificate_files_are_refused_at_start_with_the_listener(tmp_path: Path):
    config = load_config(
        None,
        environ={},
        overrides={"http": {"tls": {"cert_file": str(tmp_path / "no.pem"), "key_file": "k"}}},
    )
    assert config.http.tls is not None
    with pytest.raises(StartupError, match=r"OTLP/HTTP \(http.tls\): cannot load the TLS files"):
        reloading_context(config.http.tls, "OTLP/HTTP (http.tls)")
    with pytest.raises(OSError):
        server_context(config.http.tls)
