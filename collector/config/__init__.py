"""SextantConfig: the one configuration model, loaded from YAML and overridden by SEXTANT_* env."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from collector.config.sections import (
    AdminConfig,
    AlertsConfig,
    AssemblerConfig,
    AuthConfig,
    DecisionsConfig,
    DriftConfig,
    ExportConfig,
    GrpcConfig,
    HttpConfig,
    IngestConfig,
    LimitsConfig,
    PricingConfig,
    RulesConfig,
    SqlConfig,
    StorageConfig,
    Strict,
    WorkersConfig,
    WriterConfig,
)
from collector.errors import ConfigError

ENV_PREFIX = "SEXTANT_"


class SextantConfig(Strict):
    grpc: GrpcConfig = Field(default_factory=GrpcConfig, description="OTLP/gRPC receiver.")
    http: HttpConfig = Field(default_factory=HttpConfig, description="OTLP/HTTP receiver.")
    admin: AdminConfig = Field(default_factory=AdminConfig, description="Admin HTTP server.")
    auth: AuthConfig = Field(default_factory=AuthConfig, description="Receiver authentication.")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Input limits.")
    ingest: IngestConfig = Field(default_factory=IngestConfig, description="Decoding.")
    workers: WorkersConfig = Field(default_factory=WorkersConfig, description="Worker pool.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="DuckDB store.")
    assembler: AssemblerConfig = Field(
        default_factory=AssemblerConfig, description="Trajectory assembly."
    )
    pricing: PricingConfig = Field(default_factory=PricingConfig, description="Token prices.")
    rules: RulesConfig = Field(default_factory=RulesConfig, description="Rule packs.")
    writer: WriterConfig = Field(default_factory=WriterConfig, description="Group-commit writer.")
    sql: SqlConfig = Field(default_factory=SqlConfig, description="Live read-only SQL endpoint.")
    export: ExportConfig = Field(default_factory=ExportConfig, description="Parquet export.")
    decisions: DecisionsConfig = Field(
        default_factory=DecisionsConfig, description="Decision engine."
    )
    alerts: AlertsConfig = Field(default_factory=AlertsConfig, description="Alert channels.")
    drift: DriftConfig = Field(
        default_factory=DriftConfig, description="Drift and reliability rules."
    )
    shutdown_timeout_seconds: float = Field(
        10.0, gt=0, description="Longest wait for in-flight requests and the final flush."
    )
    log_level: str = Field("INFO", description="Python logging level name.")

    @model_validator(mode="after")
    def _check_retention_export(self) -> SextantConfig:
        if self.storage.retention.export_first and self.export.parquet_dir is None:
            raise ValueError(
                "storage.retention.export_first needs export.parquet_dir (where to export to)"
            )
        return self


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """SEXTANT_SECTION__KEY=value as a nested dict; values are read as YAML scalars."""
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{name}: conflicts with another SEXTANT_ variable")
        try:
            node[path[-1]] = yaml.safe_load(raw) if raw else raw
        except yaml.YAMLError:
            node[path[-1]] = raw
    return out


def merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def describe(error: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "(top level)"
        reason = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        lines.append(f"  {field}: {reason}")
    return "\n".join(lines)


def load_config(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> SextantConfig:
    """File < SEXTANT_* environment < command-line overrides, validated once."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
        data = loaded
    env = env_overrides(os.environ if environ is None else environ)
    if env:
        source += " + SEXTANT_* environment"
    data = merge(merge(data, env), overrides or {})
    try:
        return SextantConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe(exc, source)) from exc
