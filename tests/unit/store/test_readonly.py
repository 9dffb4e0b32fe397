"""Below the statement check, the opened store itself refuses files and configuration changes."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from collector.store.database import Database
from collector.store.sqlcheck import QueryRefused, check_read_only


@pytest.fixture
def cursor(tmp_path: Path):
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    yield database.cursor()
    database.close()


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        ("SELECT * FROM enable_logging(level := 'trace')", "the configuration has been locked"),
        ("SET memory_limit = '64GB'", "the configuration has been locked"),
        ("SET enable_external_access = true", "configuration has been locked"),
        ("SET allowed_configs = ['memory_limit']", "the configuration has been locked"),
        ("SET lock_configuration = false", "the configuration has been locked"),
    ],
)
def test_the_store_refuses_files_and_settings_to_any_cursor(
    cursor: duckdb.DuckDBPyConnection, sql: str, error: str
) -> None:
    with pytest.raises(duckdb.Error, match=error):
        cursor.execute(sql)


def test_a_cursor_may_still_set_its_own_operator_memory(cursor: duckdb.DuckDBPyConnection) -> None:
    cursor.execute("SET operator_memory_limit = '32MB'")
    row = cursor.execute("SELECT current_setting('operator_memory_limit')").fetchone()
    assert row is not None and row[0].startswith("30.")  # 32 MB, shown in MiB


def test_the_vacuum_setting_retention_may_change_is_refused_to_queries(
    cursor: duckdb.DuckDBPyConnection,
) -> None:
    with pytest.raises(QueryRefused, match="SET statements are not allowed"):
        check_read_only(cursor, "SET max_vacuum_tasks = 100")
