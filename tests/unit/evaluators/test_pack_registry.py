"""Hot reload: an unreadable file is refused alone; other edits in the same pass take effect."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry

from collector.config.sections import RulesConfig
from collector.config.writer import WriterConfig
from collector.evaluation.metrics import RulesMetrics
from collector.evaluation.packs import PackRegistry
from collector.lifecycle import deadline_in
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer

PACK = """name: {name}
version: "{version}"
owner: o
rules:
  - {{id: r, type: recovery, reason: error_without_recovery}}
"""


def test_a_broken_file_does_not_hold_back_the_other_edits(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.yaml").write_text(PACK.format(name="a", version="1"))
    (rules / "b.yaml").write_text(PACK.format(name="b", version="1"))
    database = Database(tmp_path / "s.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    registry = PackRegistry(
        RulesConfig(paths=[rules]), database, writer, RulesMetrics(CollectorRegistry())
    )
    try:
        registry.reload()
        assert sorted(p.name for p in registry.snapshot()) == ["a", "b"]

        (rules / "a.yaml").write_text(PACK.format(name="a", version="2"))
        (rules / "b.yaml").write_bytes(b"name: b\nversion: '\xe9'\n")
        os.utime(rules / "b.yaml", ns=(1, 1))
        registry.reload()
        in_force = {p.name: p for p in registry.snapshot()}
        assert 'version: "2"' in in_force["a"].text  # a's edit took effect
        assert 'version: "1"' in in_force["b"].text  # b keeps its last good version
        status = {s["pack"]: s for s in registry.status()}
        assert "not UTF-8" in status["b"]["refused"][0]
        recorded = (
            database.cursor()
            .execute("SELECT name, version FROM rule_packs ORDER BY name, version")
            .fetchall()
        )
        assert recorded == [("a", "1"), ("a", "2"), ("b", "1")]
    finally:
        writer.shutdown(deadline_in(5))
        database.close()


def test_a_refused_pack_shows_in_the_gauge_until_fixed_and_each_rule_can_count_errors(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.yaml").write_text(PACK.format(name="a", version="1"))
    database = Database(tmp_path / "s.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    metrics = CollectorRegistry()
    registry = PackRegistry(RulesConfig(paths=[rules]), database, writer, RulesMetrics(metrics))

    def value(name: str, **labels: str) -> float | None:
        return metrics.get_sample_value(name, labels)

    try:
        assert value("sextant_rules_reloads_total", result="refused") == 0
        registry.reload()
        assert value("sextant_evaluator_errors_total", pack="a", rule="r") == 0
        assert value("sextant_rules_packs_refused") == 0
        (rules / "a.yaml").write_text("name: a\nversion: [\n")
        registry.reload()
        assert value("sextant_rules_packs_refused") == 1
        assert value("sextant_rules_reloads_total", result="refused") == 1
        registry.reload()  # unchanged and still refused: no new refusal counted
        assert value("sextant_rules_packs_refused") == 1
        assert value("sextant_rules_reloads_total", result="refused") == 1
        (rules / "a.yaml").write_text(PACK.format(name="a", version="2"))
        registry.reload()
        assert value("sextant_rules_packs_refused") == 0
    finally:
        writer.shutdown(deadline_in(5))
        database.close()
