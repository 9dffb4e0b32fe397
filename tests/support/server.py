"""A real Sextant pipeline on ephemeral loopback ports, and the one factory that configures it."""

from __future__ import annotations

import shutil
import textwrap
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.admin.http import SETTLE_SECONDS
from collector.config.sections import BUILTIN_RULES
from collector.embedded import Embedded, loopback_config, start

# Trajectories close 0.3 s after their last span, so a test sees its run evaluated quickly.
FAST = {"quiet_period_seconds": 0.3, "max_trace_age_seconds": 3, "tick_seconds": 0.05}
# Decisions evaluated every 0.1 s, resolved 0.5 s after their condition clears.
DECIDE_FAST = {"interval_seconds": 0.1, "window_seconds": 60, "resolve_after_seconds": 0.5}
SHIPPED_PACKS = BUILTIN_RULES


@dataclass
class RunningServer(Embedded):
    """A real pipeline on loopback ports, with ways to look inside it."""

    rules_dir: Path | None = None  # the folder of packs it evaluates, when `serve` wrote one
    token: str | None = None  # the first of `auth.tokens`, which the helpers send

    @property
    def auth_headers(self) -> dict[str, str]:
        """What a client with the token sends (nothing when no token is configured)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def cursor(self) -> Any:
        """A read cursor once every acknowledged export is loaded, as the admin API reads."""
        self.pipeline.writer.settled().result(SETTLE_SECONDS)
        return self.pipeline.database.cursor()

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.cursor().execute(sql, params or []).fetchall()

    def query_dicts(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        cursor = self.cursor().execute(sql, params or [])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.pipeline.registry.get_sample_value(name, labels or {}) or 0.0


def start_server(data_dir: Path, **sections: Any) -> RunningServer:
    """A pipeline on 127.0.0.1 port 0 everywhere, in its own thread and event loop."""
    defaults = {"storage": {"data_dir": str(data_dir)}, "workers": {"processes": 0}}
    merged = {k: {**defaults.get(k, {}), **v} for k, v in sections.items()}
    for key, value in defaults.items():
        merged.setdefault(key, value)
    running = start(loopback_config(**merged))
    tokens = merged.get("auth", {}).get("tokens") or [None]
    first = tokens[0]["token"] if isinstance(tokens[0], dict) else tokens[0]  # a named one
    return RunningServer(running.pipeline, running.loop, running.thread, token=first)


def hold_journal(server: RunningServer) -> tuple[threading.Event, threading.Event]:
    """Make the server's journal hold its appends until released: (entered, release)."""
    journal = server.pipeline.writer.journal
    assert journal is not None
    original = journal.append
    entered, release = threading.Event(), threading.Event()

    def append(batch: list[tuple[str, str, int, bytes]]) -> list[int]:
        entered.set()
        release.wait(20)
        return original(batch)

    journal.append = append  # type: ignore[method-assign]
    return entered, release


def write_packs(rules: Path, packs: Path | Mapping[str, str | Path]) -> Path:
    """Fill the folder `rules` (unless it exists) with a folder of packs copied as it is, or with
    {file stem: YAML text or a pack file to copy}; returns it."""
    if rules.exists():
        return rules
    if isinstance(packs, Path):
        shutil.copytree(packs, rules)
        return rules
    rules.mkdir(parents=True)
    for name, pack in packs.items():
        if isinstance(pack, Path):
            shutil.copy(pack, rules / f"{name}.yaml")
        else:
            (rules / f"{name}.yaml").write_text(textwrap.dedent(pack))
    return rules


def serve(
    tmp: Path, packs: Path | Mapping[str, str | Path] | None = None, **sections: Any
) -> RunningServer:
    """A server storing under `tmp`/data and, given `packs`, evaluating them from `tmp`/rules.

    `sections` are config sections merged over the defaults key by key, e.g. `assembler=FAST`,
    `rules={"reload_seconds": 0.1}`, `decisions=DECIDE_FAST`.
    """
    rules_dir = None
    if packs is not None:
        rules_dir = write_packs(tmp / "rules", packs)
        sections["rules"] = {"paths": [str(rules_dir)], **sections.get("rules", {})}
    running = start_server(tmp / "data", **sections)
    running.rules_dir = rules_dir
    return running


def serve_shipped_packs(tmp: Path, **sections: Any) -> RunningServer:
    """The shipped packs, reloaded every 0.1 s, on fast-closing trajectories."""
    return serve(
        tmp,
        SHIPPED_PACKS,
        assembler=FAST,
        rules={"reload_seconds": 0.1},
        **sections,
    )


def serve_deciding(tmp: Path, **sections: Any) -> RunningServer:
    """`serve_shipped_packs` that also takes decisions every 0.1 s; `sections` replace whole
    sections (e.g. `decisions=` or `alerts=`)."""
    return serve_shipped_packs(tmp, **{"decisions": DECIDE_FAST, **sections})


def stored_spans(server: RunningServer, trace_id: bytes) -> int:
    """How many spans of this trace the store holds."""
    return server.query("SELECT count(*) FROM spans WHERE trace_id = ?", [trace_id.hex()])[0][0]
