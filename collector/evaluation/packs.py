"""The packs in force: load all, hot-reload edits, refuse broken ones, record every version,
and compile each version once per process (a bounded cache)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from collector.clock import Clock, SystemClock
from collector.config.sections import RulesConfig
from collector.evaluation.metrics import RulesMetrics
from collector.store.database import Database
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.ticker import Ticker, TickingStage
from evaluators.rulepack import LoadedPack, RulePack, RulePackError, load_pack, load_text

log = logging.getLogger(__name__)
RECORD_TIMEOUT_SECONDS = 30.0
# Compiled packs kept per process: a few versions of each pack in force during hot reloads.
COMPILED_PACKS = 64


@dataclass(frozen=True)
class PackText:
    """A loaded pack as it crosses to a worker: its text and hash (workers compile and cache)."""

    name: str
    sha256: str
    text: str
    disabled_rules: frozenset[str] = frozenset()


class PackSource(Protocol):
    """Where a stage beside the pipeline gets the packs in force (the registry)."""

    def snapshot(self) -> tuple[PackText, ...]: ...


_compiled: OrderedDict[tuple[str, frozenset[str]], RulePack] = OrderedDict()
_compiled_lock = threading.Lock()


def compiled(pack: PackText) -> RulePack:
    """The pack's rules, compiled once per version in this process; least recently used
    versions are dropped beyond `COMPILED_PACKS`, so hot reloads cannot grow memory."""
    key = (pack.sha256, pack.disabled_rules)
    with _compiled_lock:
        found = _compiled.get(key)
        if found is not None:
            _compiled.move_to_end(key)
            return found
    loaded = load_text(pack.text, pack.name).pack
    if pack.disabled_rules:
        kept = [r for r in loaded.rules if r.id not in pack.disabled_rules]
        loaded = loaded.model_copy(update={"rules": kept})
    with _compiled_lock:
        _compiled[key] = loaded
        while len(_compiled) > COMPILED_PACKS:
            _compiled.popitem(last=False)
    return loaded


@dataclass
class PackFile:
    path: Path
    stamp: tuple[int, int] | None = None  # (mtime_ns, size) of the last read
    good: LoadedPack | None = None  # the version being evaluated
    errors: tuple[str, ...] = ()  # why the current content was refused
    refused_at: datetime | None = None


def pack_files(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml")))
        elif path.exists():
            found.append(path)
    return found


class PackRegistry(TickingStage):
    """The packs in force. A file that fails to load keeps its last good version running."""

    def __init__(
        self,
        config: RulesConfig,
        database: Database,
        writer: Writer,
        metrics: RulesMetrics,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.database = database
        self.writer = writer
        self.metrics = metrics
        self._files: dict[Path, PackFile] = {}
        self._lock = threading.Lock()
        self.ticker = Ticker("sextant-rules", config.reload_seconds, self.reload)
        self._snapshot: tuple[PackText, ...] = ()
        self._unrecorded: list[LoadedPack] = []
        # told after each change of the packs in force (the guard's native listener forgets
        # the packs it was told)
        self.on_publish: list[Callable[[], None]] = []

    def start(self) -> None:
        self.reload()
        # Said once at start: a path may appear later (a mounted volume) and is then loaded.
        for path in self.config.paths:
            if not path.exists():
                log.warning("rules.paths: %s does not exist; no packs from it until it does", path)
        if not self._files:
            log.warning("no rule packs found: nothing is evaluated until a pack appears")
        super().start()

    def snapshot(self) -> tuple[PackText, ...]:
        return self._snapshot

    def reload(self) -> bool:
        """Read files that changed; returns whether the packs in force changed."""
        changed = False
        present = set(pack_files(self.config.paths))
        with self._lock:
            try:
                for path in sorted(present):  # sorted: the same file wins a name clash each time
                    entry = self._files.setdefault(path, PackFile(path))
                    try:
                        stat = path.stat()
                    except OSError:
                        continue  # removed between listing and reading: next reload sees it
                    stamp = (stat.st_mtime_ns, stat.st_size)
                    if stamp == entry.stamp:
                        continue
                    changed |= self._read(entry)
                    entry.stamp = stamp
                for path in set(self._files) - present:
                    log.warning("rule pack %s was removed; its rules are no longer evaluated", path)
                    del self._files[path]
                    changed = True
            finally:
                if changed:
                    self._publish()
                self.metrics.refused.set(sum(1 for f in self._files.values() if f.errors))
        self._record()
        return changed

    def _read(self, entry: PackFile) -> bool:
        try:
            try:
                loaded = load_pack(entry.path)
            except RulePackError:
                raise
            except Exception as exc:  # unreadable bytes, absurd nesting: a refusal like any other
                problem = f"{entry.path}: cannot load: {type(exc).__name__}: {exc}"
                raise RulePackError([problem]) from exc
            others = {
                f.good.pack.name: f.path for f in self._files.values() if f.good and f is not entry
            }
            if loaded.pack.name in others:
                raise RulePackError(
                    [
                        f"{entry.path}:1: name: pack {loaded.pack.name!r} is already loaded from"
                        f" {others[loaded.pack.name]}"
                    ]
                )
        except RulePackError as exc:
            entry.errors = tuple(exc.errors)
            entry.refused_at = self.clock.now()
            self.metrics.reloads.labels("refused").inc()
            kept = f"; keeping version {entry.good.pack.version}" if entry.good else ""
            log.error("rule pack %s refused%s:\n  %s", entry.path, kept, "\n  ".join(exc.errors))
            return False
        same = entry.good is not None and entry.good.sha256 == loaded.sha256
        entry.errors, entry.refused_at = (), None
        if same:
            return False
        entry.good = loaded
        self.metrics.reloads.labels("loaded").inc()
        log.info(
            "rule pack %s version %s loaded from %s (%d rules, sha256 %s)",
            loaded.pack.name,
            loaded.pack.version,
            entry.path,
            len(loaded.pack.rules),
            loaded.sha256[:12],
        )
        self._unrecorded.append(loaded)
        return True

    def _publish(self) -> None:
        disabled = set(self.config.disabled)
        packs = []
        for entry in sorted(self._files.values(), key=lambda f: str(f.path)):
            if entry.good is None or entry.good.pack.name in disabled:
                continue
            name = entry.good.pack.name
            off = frozenset(r.id for r in entry.good.pack.rules if f"{name}/{r.id}" in disabled)
            packs.append(PackText(name, entry.good.sha256, entry.good.text, off))
            for rule in entry.good.pack.rules:  # at 0, so `increase()` sees a rule's first error
                if rule.id not in off:
                    self.metrics.errors.labels(name, rule.id)
        self._snapshot = tuple(packs)
        for told in self.on_publish:
            told()
        self.metrics.packs.set(len(packs))

    def _record(self) -> None:
        """Every version ever loaded goes to `rule_packs` once, with its hash."""
        pending, self._unrecorded = self._unrecorded, []
        if not pending:
            return
        cursor = self.database.cursor()
        try:
            known = {
                r[0] for r in cursor.execute("SELECT DISTINCT sha256 FROM rule_packs").fetchall()
            }
        except Exception as exc:  # retried on the next reload
            log.warning("could not read recorded rule pack versions yet: %s", exc)
            self._unrecorded.extend(pending)
            return
        finally:
            cursor.close()
        now = self.clock.now()
        rows = [
            {
                "name": p.pack.name,
                "version": p.pack.version,
                "sha256": p.sha256,
                "owner": p.pack.owner,
                "source": p.source,
                "rules": len(p.pack.rules),
                "text": p.text,
                "loaded_at": now,
            }
            for p in pending
            if p.sha256 not in known
        ]
        if not rows:
            return
        try:
            table = rows_table("rule_packs", rows)
            self.writer.submit("rule_packs", table).result(RECORD_TIMEOUT_SECONDS)
        except Exception as exc:  # retried on the next reload
            log.warning("could not record rule pack versions yet: %s", exc)
            self._unrecorded.extend(pending)

    def status(self) -> list[dict[str, Any]]:
        with self._lock:
            out = []
            for entry in sorted(self._files.values(), key=lambda f: str(f.path)):
                good = entry.good
                out.append(
                    {
                        "source": str(entry.path),
                        "pack": good.pack.name if good else None,
                        "version": good.pack.version if good else None,
                        "owner": good.pack.owner if good else None,
                        "sha256": good.sha256 if good else None,
                        "rules": [r.id for r in good.pack.rules] if good else [],
                        "rule_types": {r.id: r.type for r in good.pack.rules} if good else {},
                        "refused": list(entry.errors),
                        "refused_at": iso_utc(entry.refused_at) if entry.refused_at else None,
                    }
                )
            return out


def iso_utc(moment: datetime) -> str:
    return moment.replace(tzinfo=UTC).isoformat()
