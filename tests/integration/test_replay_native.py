"""`sextant replay` evaluates natively by default and with the Python evaluators under
`--reference`: the same changes, verdicts, reasons and stored result rows, on every recorded
capture a real server stored (sent as an exporter sends them), under each shipped and example
pack alone and under the shipped packs together. Rules the interpreter leaves to Python (a
regex condition) are evaluated on the runs they apply to, within the native replay."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from collector.cli._source import SourceSpec
from collector.config.sections import BUILTIN_RULES
from collector.evaluation.native_round import native_pack
from collector.evaluation.packs import PackText
from collector.replay.run import Report, replay
from collector.replay.selection import Selection
from evaluators.rulepack import LoadedPack, RulePackError, load_pack
from tests.support.captures import CAPTURES, send
from tests.support.cli import sextant
from tests.support.paths import TESTDATA
from tests.support.server import FAST, SHIPPED_PACKS, serve
from tests.support.wait import wait_for

FILES = sorted(
    [
        *CAPTURES.glob("*.otlp.json"),
        *CAPTURES.glob("*.body.json"),
        *(TESTDATA / "otlp-multi").glob("*.otlp.json"),
    ],
    key=lambda p: p.name,
)
SHIPPED = sorted(BUILTIN_RULES.glob("*.yaml"))
PACK_FILES = [*SHIPPED, *sorted((BUILTIN_RULES / "examples").glob("*.yaml"))]
NOW = datetime(2026, 12, 5, 12, 0, 0)
# What differs between two replays of the same runs: the replay's id and how long it took.
OWN = re.compile(r"replay [0-9a-f]{16}|\([0-9.]+ s, [0-9,]+ trajectories/s\)")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped collector's file: every capture assembled and evaluated live under the
    shipped packs."""
    tmp = tmp_path_factory.mktemp("replay-native")
    server = serve(tmp, SHIPPED_PACKS, assembler=FAST)
    try:
        for path in FILES:
            send(server, path, "http/json")
        wait_for(
            lambda: server.query("SELECT count(*) FROM trajectories")[0][0] >= len(FILES),
            timeout=30,
        )
        wait_for(lambda: server.metric("sextant_assembler_pending_traces") == 0)
    finally:
        server.stop()
    return tmp / "data" / "sextant.duckdb"


def replayed(
    db: Path, packs: list[LoadedPack], reference: bool, jobs: int = 1
) -> tuple[Report, pa.Table | None]:
    """The replay's report and the result rows it would store (None when no rule applied)."""
    spec = SourceSpec(db=db)
    source = spec.open()
    try:
        ids = Selection().keys(source)
        report, tables = replay(
            spec, source, ids, packs, NOW, write=True, jobs=jobs, reference=reference
        )
    finally:
        source.close()
    if not tables:
        return report, None
    rows = pa.concat_tables(tables).drop_columns(["replay_id"])
    return report, rows.sort_by(
        [("trace_id", "ascending"), ("pack", "ascending"), ("rule_id", "ascending")]
    )


def loaded(path: Path) -> list[LoadedPack]:
    try:
        return [load_pack(path)]
    except RulePackError:
        return []


@pytest.mark.parametrize(
    "packs",
    [*(loaded(p) for p in PACK_FILES), [load_pack(p) for p in SHIPPED]],
    ids=[*(p.stem for p in PACK_FILES), "shipped-together"],
)
def test_native_replay_gives_what_the_reference_gives(store: Path, packs: list[LoadedPack]) -> None:
    native, native_rows = replayed(store, packs, reference=False)
    python, python_rows = replayed(store, packs, reference=True)
    assert len(python.outcomes) >= len(FILES)
    assert native.outcomes == python.outcomes
    assert native.changes == python.changes
    assert native.results == python.results
    if python_rows is None:
        assert native_rows is None
    else:
        assert native_rows is not None and native_rows.equals(python_rows)


def test_a_rule_left_to_python_is_evaluated_within_the_native_replay(store: Path) -> None:
    """The example RAG pack's regex rule is not interpreted natively: its results come from
    the Python evaluators, for the runs it applies to, and they are in the native replay's."""
    pack = load_pack(BUILTIN_RULES / "examples" / "rag.yaml")
    left = native_pack(PackText(pack.source, pack.sha256, pack.text)).python_rules
    assert left
    _, rows = replayed(store, [pack], reference=False)
    assert rows is not None and set(rows["rule_id"].to_pylist()) & left


def test_the_comparison_has_something_to_compare(store: Path) -> None:
    report, rows = replayed(store, [load_pack(p) for p in PACK_FILES], reference=False)
    verdicts = {o.new for o in report.outcomes.values()}
    assert {"pass", "fail"} <= verdicts
    assert report.changes and rows is not None and rows.num_rows == report.results


def test_the_cli_prints_the_same_report_either_way_from_a_file_and_an_export(
    store: Path, tmp_path: Path, capsys
) -> None:
    parquet = tmp_path / "parquet"
    code, out = sextant(capsys, "export", "parquet", "--out", str(parquet), "--db", str(store))
    assert code == 0, out
    examples = ["--rules", str(BUILTIN_RULES / "examples"), "--jobs", "1"]
    reports = []
    for source in (["--db", str(store)], ["--parquet", str(parquet)]):
        for reference in ([], ["--reference"]):
            code, out = sextant(capsys, "replay", *source, *examples, *reference)
            assert code == 0, out
            reports.append(OWN.sub("", out))
    assert "verdict changes" in reports[0]
    assert reports == [reports[0]] * 4


def test_a_pack_the_interpreter_reads_whole_builds_no_python_trajectory(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collector.replay import evaluate

    def refused(*_: object) -> None:
        raise AssertionError("a Trajectory was built for a pack read natively")

    monkeypatch.setattr(evaluate, "trajectories_of", refused)
    report, rows = replayed(store, [load_pack(p) for p in SHIPPED], reference=False)
    assert rows is not None and rows.num_rows == report.results > 0


def test_worker_processes_replay_natively_as_one_process_does(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of a few runs spread over two worker processes, each evaluating natively or
    with the reference as it was told."""
    from collector.replay import run

    monkeypatch.setattr(run, "BATCH", 8)
    packs = [load_pack(p) for p in PACK_FILES]
    one, one_rows = replayed(store, packs, reference=False)
    for reference in (False, True):
        two, two_rows = replayed(store, packs, reference=reference, jobs=2)
        assert two.outcomes == one.outcomes
        assert two.changes == one.changes
        assert one_rows is not None and two_rows is not None and two_rows.equals(one_rows)
