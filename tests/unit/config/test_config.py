"""Config: embedded defaults, file < environment < flags, and errors that name the key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from collector.config import load_config
from collector.config.writer import WriterConfig
from collector.errors import ConfigError

A, B = "first-token-0123456789", "second-token-0123456789"  # auth.tokens need 16 characters


def test_embedded_defaults() -> None:
    config = load_config(None, environ={})
    assert config.grpc.host_port == ("0.0.0.0", 4317)
    assert config.http.host_port == ("0.0.0.0", 4318)
    assert config.admin.host_port == ("127.0.0.1", 9464)  # the API and console: this machine
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
            "SEXTANT_AUTH__TOKENS": f"{A}, {B}",
            "SEXTANT_GRPC__ADDR": "127.0.0.1:5000",
            "OTHER": "ignored",
        },
        overrides={"grpc": {"addr": "127.0.0.1:6000"}},
    )
    assert config.limits.max_request_bytes == 2048
    assert [t.get_secret_value() for t in config.auth.tokens] == [A, B]
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


@pytest.mark.parametrize("value", ["a,b", " a , b ", "[a, b]", '["a", "b"]'], ids=repr)
def test_list_keys_from_the_environment_take_a_comma_list_or_yaml_or_json(value: str) -> None:
    value = value.replace("a", A).replace("b", B)
    config = load_config(None, environ={"SEXTANT_AUTH__TOKENS": value})
    assert [t.get_secret_value() for t in config.auth.tokens] == [A, B]


def test_rules_keys_from_the_environment() -> None:
    environ = {
        "SEXTANT_RULES__PATHS": "/x",
        "SEXTANT_RULES__DISABLED": '["default/no_secrets", "travel"]',
        "SEXTANT_STORAGE__RETENTION__DAYS": "7",
        "SEXTANT_PRICING__MODELS": '{"m-1": {"input": 1, "output": 2}}',
    }
    config = load_config(None, environ=environ)
    assert config.rules.paths == [Path("/x")]
    assert config.rules.disabled == ["default/no_secrets", "travel"]
    assert config.storage.retention.days == 7
    assert config.pricing.models["m-1"].output == 2


def test_the_cli_s_variables_and_other_tools_are_not_config() -> None:
    from collector.cli._flags import TOKEN_ENV

    environ = {TOKEN_ENV: "t", "SEXTANT_URL": "http://x", "SEXTANT_HOME": "/h"}
    assert load_config(None, environ=environ) == load_config(None, environ={})
    # and never can be: no key of the config is named like them
    from collector.config import SextantConfig

    names = {name.removeprefix("SEXTANT_").lower() for name in environ}
    assert names.isdisjoint(SextantConfig.model_fields)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SEXTANT_GRPCC__ADDR": "x:1"}, "SEXTANT_GRPCC__ADDR: unknown section"),
        ({"SEXTANT_GRPC__ADRR": "x:1"}, "grpc.adrr: unknown key"),
        ({"SEXTANT_LOG_LEVEL": "loud"}, "log_level: Value error, expected one of DEBUG, INFO"),
        ({"SEXTANT_RULES__PATHS": "[unclosed"}, "paths: not valid YAML or JSON"),
    ],
)
def test_environment_errors_are_one_line_naming_the_key(environ, message) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ=environ)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_log_level_is_taken_in_any_case() -> None:
    assert load_config(None, environ={"SEXTANT_LOG_LEVEL": "debug"}).log_level == "DEBUG"


def test_settings_read_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.config import SextantConfig

    monkeypatch.setenv("SEXTANT_GRPC__ADDR", "127.0.0.1:7000")
    monkeypatch.setenv("SEXTANT_TOKEN", "the CLI's")
    assert SextantConfig().grpc.addr == "127.0.0.1:7000"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"auth": {"tokens": [A, "short"]}}, "auth.tokens.1: Value error, 5 characters"),
        ({"admin": {"allowed_hosts": ["https://ops.example"]}}, "admin.allowed_hosts.0"),
        ({"admin": {"allowed_hosts": ["ops.example:443"]}}, "admin.allowed_hosts.0"),
    ],
)
def test_short_tokens_and_host_names_with_more_than_a_name_are_refused(
    overrides: dict, key: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(None, environ={}, overrides=overrides)
    assert key in str(refused.value)
    assert "short" not in str(refused.value)


def test_allowed_hosts_are_compared_lower_case() -> None:
    config = load_config(None, environ={}, overrides={"admin": {"allowed_hosts": ["Ops.Example."]}})
    assert config.admin.allowed_hosts == ["ops.example"]


def test_retention_by_age_is_a_duration_and_one_age_is_given(tmp_path: Path) -> None:
    retention = {"storage": {"retention": {"max_age": "6h"}}}
    assert load_config(None, environ={}, overrides=retention).storage.retention.age == timedelta(
        hours=6
    )
    days = {"storage": {"retention": {"days": 3}}}
    assert load_config(None, environ={}, overrides=days).storage.retention.age == timedelta(days=3)
    assert load_config(None, environ={}).storage.retention.age is None
    path = tmp_path / "sextant.yaml"
    for text, message in (
        ("storage: {retention: {days: 2, max_age: 6h}}", "one of days and max_age"),
        (
            f"export: {{parquet_dir: {tmp_path}}}\n"
            "storage: {retention: {max_age: 6h, export_first: true}}",
            "export_first exports whole days",
        ),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError) as refused:
            load_config(path, environ={})
        assert "storage.retention" in str(refused.value) and message in str(refused.value)
