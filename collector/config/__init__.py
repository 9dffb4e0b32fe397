"""SextantConfig: the one configuration model: a YAML file < SEXTANT_* environment < flags."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from collector.config.auth import AuthConfig
from collector.config.decisions import AlertsConfig, DecisionsConfig
from collector.config.environment import SextantEnvironment, environment_values
from collector.config.evaluation import (
    DriftConfig,
    EvaluationEventsConfig,
    JudgesConfig,
    ReviewConfig,
    SessionsConfig,
)
from collector.config.guard import GuardConfig
from collector.config.sections import (
    AdminConfig,
    AssemblerConfig,
    ClusterConfig,
    ExportConfig,
    GrpcConfig,
    HttpConfig,
    IngestConfig,
    LimitsConfig,
    PricingConfig,
    RulesConfig,
    SqlConfig,
    StorageConfig,
    WorkersConfig,
)
from collector.config.writer import WriterConfig
from collector.errors import ConfigError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SextantConfig(BaseSettings):
    """Strict like every section (unknown keys are errors, frozen once loaded); as settings,
    `SextantConfig()` reads the SEXTANT_* environment the way `load_config` does."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

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
    judges: JudgesConfig = Field(
        default_factory=JudgesConfig, description="LLM judges (`judge` rules) beside the pipeline."
    )
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig, description="Scale-out: this replica among several."
    )
    sessions: SessionsConfig = Field(
        default_factory=SessionsConfig, description="Sessions (conversations of many runs)."
    )
    evaluation_events: EvaluationEventsConfig = Field(
        default_factory=EvaluationEventsConfig,
        description="Results sent on as OpenTelemetry evaluation events.",
    )
    review: ReviewConfig = Field(
        default_factory=ReviewConfig, description="Review queues: reviewers' claims on items."
    )
    guard: GuardConfig = Field(
        default_factory=GuardConfig, description="The runtime guard agents ask before a call."
    )
    shutdown_timeout_seconds: float = Field(
        10.0, gt=0, description="Longest wait for in-flight requests and the final flush."
    )
    log_level: str = Field(
        "INFO", description="Python logging level name: DEBUG, INFO, WARNING, ERROR, CRITICAL."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, SextantEnvironment(settings_cls)

    @field_validator("log_level")
    @classmethod
    def _check_log_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}")
        return value.upper()

    @model_validator(mode="after")
    def _check_retention_export(self) -> SextantConfig:
        if self.storage.retention.export_first and self.export.parquet_dir is None:
            raise ValueError(
                "storage.retention.export_first needs export.parquet_dir (where to export to)"
            )
        return self


def merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def describe(error: ValidationError, source: str) -> str:
    """One line for one error; a heading and a line per key for several."""
    found = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "(top level)"
        reason = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        found.append(f"{field}: {reason}")
    if len(found) == 1:
        return f"invalid configuration ({source}): {found[0]}"
    return "\n  ".join([f"invalid configuration ({source}):", *found])


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
    env = environment_values(SextantConfig, environ)
    if env:
        source += " + SEXTANT_* environment"
    data = merge(merge(data, env), overrides or {})
    try:
        return SextantConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe(exc, source)) from exc
