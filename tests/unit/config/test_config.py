"""Config: embedded defaults, file < environment < flags, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.config import load_config
from collector.config.sections import WriterConfig
from collector.errors import ConfigError


def test_embedded_defaults() -> None:
    config = load_config(None, environ={})
    assert config.grpc.host_port == ("0.0.0.0", 4317)
    assert config.http.host_port == ("0.0.0.0", 4318)
    assert config.admin.host_port == ("0.0.0.0", 9464)
    assert config.storage.database == Path("sextant-data/sextant.duckdb")
    assert config.limits.max_request_bytes == 16 * 1024 * 1024
    assert config.auth.tokens == []


def test_environment_overrides_file_and_flags_override_environment(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("grpc: {addr: '1.2.3.4:1'}\nlimits: {max_request_bytes: 100}\n")
    config = load_config(
        path,
        environ={
            "SEXTANT_LIMITS__MAX_REQUEST_BYTES": "2048",
            "SEXTANT_AUTH__TOKENS": "a, b",
            "SEXTANT_GRPC__ADDR": "127.0.0.1:5000",
            "OTHER": "ignored",
        },
        overrides={"grpc": {"addr": "127.0.0.1:6000"}},
    )
    assert config.limits.max_request_bytes == 2048
    assert [t.get_secret_value() for t in config.auth.tokens] == ["a", "b"]
    assert config.grpc.addr == "127.0.0.1:6000"


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("grpc: {addr: 'nope'}", "grpc.addr: Value error, expected HOST:PORT"),
        ("grpc: {addr: '1.2.3.4:70000'}", "grpc.addr: Value error"),
        ("limits: {max_request_bytes: 0}", "limits.max_request_bytes: Input should be greater"),
        ("limit: {}", "limit: unknown key"),
        ("writer: {max_queue_rows: many}", "writer.max_queue_rows: Input should be a valid"),
        ("storage: {memory_limit: lots}", "storage.memory_limit"),
        ("assembler: {quiet_period_seconds: 5 parsecs}", "assembler.quiet_period_seconds: Value"),
        ("decisions: {window_seconds: 0}", "decisions.window_seconds: Input should be greater"),
        ("- a list", "the top level must be a mapping"),
        ("grpc: [unclosed", "not valid YAML"),
    ],
)
def test_invalid_files_are_refused_with_the_key(tmp_path: Path, yaml_text: str, message: str):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert message in str(caught.value)
    assert "bad.yaml" in str(caught.value)


def test_invalid_environment_value_names_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ={"SEXTANT_WRITER__MAX_QUEUE_ROWS": "-5"})
    assert "writer.max_queue_rows" in str(caught.value)
    assert "SEXTANT_* environment" in str(caught.value)


def test_every_seconds_key_takes_the_duration_grammar(tmp_path: Path) -> None:
    path = tmp_path / "sextant.yaml"
    path.write_text("assembler: {quiet_period_seconds: 2s, max_trace_age_seconds: 10m}\n")
    config = load_config(path, environ={"SEXTANT_DECISIONS__WINDOW_SECONDS": "1h"})
    assert config.assembler.quiet_period_seconds == 2.0
    assert config.assembler.max_trace_age_seconds == 600.0
    assert config.decisions.window_seconds == 3600.0
    assert config.writer.max_linger_seconds == WriterConfig().max_linger_seconds  # untouched
