"""The service's keys from the environment: SEXTANT_<SECTION>__<KEY>, read by pydantic-settings.

Only variables that name a key are read, so the CLI's own variables (`SEXTANT_URL`,
`SEXTANT_TOKEN`) and any other tool's `SEXTANT_*` are left alone; a `SEXTANT_<X>__...` naming no
section is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource

from collector.errors import ConfigError

ENV_PREFIX = "SEXTANT_"
NESTED = "__"
# A list or mapping value that starts with one of these is YAML (so JSON too); others are a
# comma list: SEXTANT_RULES__PATHS=/a.yaml,/b  or  SEXTANT_RULES__PATHS='["/a.yaml", "/b"]'.
STRUCTURED = ("[", "{")


class SextantEnvironment(EnvSettingsSource):
    """The environment source of SextantConfig, read from `environ` (default: os.environ)."""

    def __init__(
        self, settings_cls: type[BaseSettings], environ: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(
            settings_cls,
            case_sensitive=False,
            env_prefix=ENV_PREFIX,
            env_nested_delimiter=NESTED,
            env_parse_none_str="null",
        )
        if environ is not None:
            self.env_vars = {name.lower(): value for name, value in environ.items()}

    def decode_complex_value(self, field_name: str, field: FieldInfo | None, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith(STRUCTURED):
            try:
                return yaml.safe_load(value)
            except yaml.YAMLError as exc:
                problem = getattr(exc, "problem", None) or "cannot be parsed"
                raise ConfigError(
                    f"invalid configuration (SEXTANT_* environment): {field_name}:"
                    f" not valid YAML or JSON ({problem})"
                ) from exc
        return [item.strip() for item in value.split(",") if item.strip()]

    def unknown_sections(self) -> list[str]:
        """`SEXTANT_<X>__...` variables whose <X> is no key of the config: typos, refused."""
        keys = set(self.settings_cls.model_fields)
        unknown = []
        for name in self.env_vars:
            if not name.startswith(ENV_PREFIX.lower()) or NESTED not in name:
                continue
            if name[len(ENV_PREFIX) :].split(NESTED, 1)[0] not in keys:
                unknown.append(name.upper())
        return sorted(unknown)


def environment_values(
    settings_cls: type[BaseSettings], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The keys the environment sets, as a nested dict to merge over the file's."""
    source = SextantEnvironment(settings_cls, environ)
    if unknown := source.unknown_sections():
        sections = ", ".join(sorted(settings_cls.model_fields))
        raise ConfigError(
            f"invalid configuration (SEXTANT_* environment): {unknown[0]}: unknown section"
            f" (the keys are {sections})"
        )
    return source()
