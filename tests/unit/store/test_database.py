"""The store creates and migrates its own schema, and refuses a newer one."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from collector.errors import StartupError
from collector.store.database import ROW_GROUP_ROWS, Database
from collector.store.migrations import MIGRATIONS, SCHEMA_VERSION
from collector.store.tables import ARROW_SCHEMAS, INSERTS


def test_an_older_store_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    for statement in MIGRATIONS[1]:
        con.execute(statement)
    con.execute("INSERT INTO schema_version (version) VALUES (1)")
    con.execute("INSERT INTO spans (trace_id, span_id, name) VALUES ('t', 's', 'kept')")
    con.close()

    database = Database(path)
    database.open()
    cursor = database.cursor()
    assert database.version() == SCHEMA_VERSION
    assert cursor.execute("SELECT name FROM spans").fetchall() == [("kept",)]
    tables = {
        r[0] for r in cursor.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    assert {"spans", "logs", "trajectories", "steps", "schema_version"} <= tables
    database.close()
    database.open()  # opening again applies nothing
    assert database.cursor().execute("SELECT count(*) FROM schema_version").fetchone() == (
        SCHEMA_VERSION,
    )
    database.close()


def test_a_newer_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    database = Database(path)
    database.open()
    database.connection.execute("INSERT INTO schema_version (version) VALUES (99)")
    database.close()
    with pytest.raises(StartupError, match="schema version 99, newer than this Sextant"):
        Database(path).open()


def test_a_version_6_store_gets_the_objecting_rules_of_its_runs(tmp_path: Path) -> None:
    """Runs stored before the list filtered by rule on its own column get it from their live
    results: failing and reviewing rules, not passes, not replays."""
    path = tmp_path / "v6.duckdb"
    con = duckdb.connect(str(path))
    for version in range(1, 7):
        for statement in MIGRATIONS[version]:
            con.execute(statement)
        con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
    con.execute("INSERT INTO trajectories (trace_id, revision, is_current) VALUES ('t', 1, true)")
    results = [
        ("support", "approval", "fail", "live"),
        ("default", "budget", "review", "live"),
        ("default", "loop", "pass", "live"),
        ("support", "tone", "fail", "replay"),
    ]
    for pack, rule, verdict, origin in results:
        con.execute(
            "INSERT INTO results (trace_id, revision, pack, rule_id, verdict, scope, origin)"
            " VALUES ('t', 1, ?, ?, ?, 'trajectory', ?)",
            [pack, rule, verdict, origin],
        )
    con.close()
    database = Database(path)
    database.open()
    row = database.cursor().execute("SELECT verdict_rules FROM trajectories").fetchone()
    assert row == (["default/budget", "support/approval"],)
    database.close()


def test_a_version_10_store_numbers_its_rows_and_new_rows_follow_them(tmp_path: Path) -> None:
    """Logs and runs stored before get an order of their own; rows stored after come after
    them, so a stage following the store after an upgrade misses none."""
    path = tmp_path / "v10.duckdb"
    con = duckdb.connect(str(path))
    for version in range(1, 11):
        for statement in MIGRATIONS[version]:
            con.execute(statement)
        con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
    con.execute("INSERT INTO trajectories (trace_id, revision, is_current) VALUES ('t', 1, true)")
    con.execute("INSERT INTO logs (trace_id) VALUES ('t'), ('u')")
    con.close()
    database = Database(path)
    database.open()
    cursor = database.cursor()
    old = cursor.execute("SELECT max(store_seq), count(store_seq) FROM logs").fetchone()
    assert old is not None and old[1] == 2
    cursor.execute("INSERT INTO logs (trace_id, store_seq) VALUES ('v', nextval('store_seq'))")
    new = cursor.execute("SELECT store_seq FROM logs WHERE trace_id = 'v'").fetchone()
    assert new is not None and new[0] > old[0]
    database.close()


def test_a_version_10_store_keys_its_sessions_by_their_service(tmp_path: Path) -> None:
    """Sessions stored when a conversation id alone was the key keep their latest turn's
    service as theirs, and the next turn of that service replaces that row only."""
    path = tmp_path / "v10.duckdb"
    con = duckdb.connect(str(path))
    for version in range(1, 11):
        for statement in MIGRATIONS[version]:
            con.execute(statement)
        con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
    con.execute(
        "INSERT INTO sessions (session_id, status, service_name, turns, reopened, last_turn_at)"
        " VALUES ('user-4711', 'open', 'support-desk', 2, 0, now())"
    )
    con.close()
    database = Database(path)
    database.open()
    rows = database.cursor().execute("SELECT session_id, session_service FROM sessions").fetchall()
    assert rows == [("user-4711", "support-desk")]
    database.close()


def test_a_version_16_store_keeps_its_evaluator_cards_as_cards_of_cases(tmp_path: Path) -> None:
    """Cards calibrated before cards could come from reviewers' labels get an id and say they
    came from a cases file; no run is marked as used by them."""
    path = tmp_path / "v16.duckdb"
    con = duckdb.connect(str(path))
    for version in range(1, 17):
        for statement in MIGRATIONS[version]:
            con.execute(statement)
        con.execute("INSERT INTO schema_version (version) VALUES (?)", [version])
    con.execute(
        "INSERT INTO evaluator_cards (pack, pack_version, rule_id, model, template_sha256, cases,"
        " positives, negatives, unjudged, calibrated_at) VALUES"
        " ('support-judges', '1.0.0', 'helpful-answer', 'judge-mini', 'ab', 24, 12, 12, 0, now()),"
        " ('support-judges', '1.0.1', 'helpful-answer', 'judge-mini', 'ab', 30, 15, 15, 0, now())"
    )
    con.close()
    database = Database(path)
    database.open()
    cursor = database.cursor()
    rows = cursor.execute("SELECT card_id, source, reused_labels FROM evaluator_cards").fetchall()
    assert [(source, reused) for _, source, reused in rows] == [("cases", None), ("cases", None)]
    assert len({card_id for card_id, _, _ in rows}) == 2 and all(len(r[0]) == 32 for r in rows)
    assert cursor.execute("SELECT count(*) FROM card_labels").fetchone() == (0,)
    database.close()


def spans_batch(count: int, first: int = 0) -> pa.Table:
    """`count` spans of one trace each, as the decoder hands them to the writer."""
    ids = [f"{i:032x}" for i in range(first, first + count)]
    columns = {
        name: pa.nulls(count, type=t)
        for name, t in zip(ARROW_SCHEMAS["spans"].names, ARROW_SCHEMAS["spans"].types, strict=True)
    }
    columns |= {"trace_id": pa.array(ids), "span_id": pa.array(i[:16] for i in ids)}
    columns["attributes"] = pa.array(['{"gen_ai.prompt": "' + "x" * 200 + '"}'] * count)
    return pa.table(columns, schema=ARROW_SCHEMAS["spans"])


def commit_spans(database: Database, batch: pa.Table) -> None:
    con = database.connection
    con.register("batch", batch)
    con.execute("BEGIN")
    con.execute(INSERTS["spans"], {"received_at": datetime(2026, 12, 1)})
    con.execute("COMMIT")
    con.unregister("batch")


def test_a_commit_of_a_row_group_or_more_is_written_once_not_through_the_wal(
    tmp_path: Path,
) -> None:
    """Under load a commit holds a few thousand spans or a round's steps: those go straight into
    the file instead of the write-ahead log and again at the next checkpoint. A small commit
    still goes through the log, and both are read back, also after a restart."""
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    database.connection.execute("CHECKPOINT")
    before = database.wal_bytes
    commit_spans(database, spans_batch(3 * ROW_GROUP_ROWS))
    assert database.wal_bytes - before < 64 * 1024  # the rows hold 5 MiB of JSON alone
    commit_spans(database, spans_batch(100, first=3 * ROW_GROUP_ROWS))
    assert database.wal_bytes - before > 100 * 200
    database.close()
    database.open()
    cursor = database.cursor()
    assert cursor.execute("SELECT count(*) FROM spans").fetchone() == (3 * ROW_GROUP_ROWS + 100,)
    database.close()


def test_cursors_start_in_the_store_named_after_its_file(tmp_path: Path) -> None:
    """The file is attached to take a row group size; readers' cursors and the SQL endpoint's
    `current_database()` still find it as `duckdb.connect(path)` would."""
    database = Database(tmp_path / "it's here.duckdb")
    database.open()
    commit_spans(database, spans_batch(3))
    cursor = database.cursor()
    assert cursor.execute("SELECT current_database(), count(*) FROM spans").fetchone() == (
        "it's here",
        3,
    )
    databases = cursor.execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal")
    assert {r[0] for r in databases.fetchall()} == {"it's here"}
    database.close()


def test_span_payloads_are_kept_with_zstd_and_still_read_as_json(tmp_path: Path) -> None:
    """A span's attributes, events and links are its bulk: zstd keeps them for less CPU and
    fewer bytes than DuckDB's own choice, and SQL over them is unchanged."""
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    batch = spans_batch(ROW_GROUP_ROWS)
    prompts = [
        f'{{"gen_ai.prompt": "question {i}: ' + "why " * 40 + '"}' for i in range(len(batch))
    ]
    events = [
        f'[{{"name": "gen_ai.choice", "attributes": {{"index": {i}}}}}]' for i in range(len(batch))
    ]
    batch = batch.set_column(
        batch.schema.get_field_index("attributes"), "attributes", pa.array(prompts)
    )
    batch = batch.set_column(batch.schema.get_field_index("events"), "events", pa.array(events))
    batch = batch.set_column(
        batch.schema.get_field_index("links"), "links", pa.array(["[]"] * len(batch))
    )
    commit_spans(database, batch)
    database.connection.execute("CHECKPOINT")
    cursor = database.cursor()
    kept = cursor.execute(
        "SELECT column_name, list_distinct(list(compression)) FROM pragma_storage_info('spans')"
        " WHERE column_name IN ('attributes', 'events', 'links') AND segment_type <> 'VALIDITY'"
        " GROUP BY ALL"
    ).fetchall()
    assert {name: sorted(ways) for name, ways in kept} == {
        "attributes": ["ZSTD"],
        "events": ["ZSTD"],
        "links": ["ZSTD"],
    }
    row = cursor.execute(
        "SELECT typeof(attributes), attributes->>'$.\"gen_ai.prompt\"', events->0->>'name'"
        " FROM spans WHERE trace_id = ?",
        [f"{7:032x}"],
    ).fetchone()
    assert row == ("JSON", "question 7: " + "why " * 40, "gen_ai.choice")
    database.close()
