"""Which SQL may run on the SQL endpoint: one query that reads the store's tables and views and an
allow-list of table functions, checked on the statement as DuckDB parses it."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import duckdb
import orjson

from collector.errors import PermanentError

# DESCRIBE, SHOW, SUMMARIZE, FROM-first queries and VALUES all parse as SELECT.
ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
ALLOWED_NAMES = "SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE and EXPLAIN"

# Generators, unnesting, JSON and the catalog of the store's own tables. Everything else is
# refused: the readers (read_*, glob, query), the ones that act on the database (checkpoint,
# enable_logging) and the ones that show settings, secrets, logs, files or other sessions.
TABLE_FUNCTIONS = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "json_each",
        "json_tree",
        "duckdb_tables",
        "duckdb_columns",
        "duckdb_views",
        "duckdb_schemas",
        "duckdb_types",
        "duckdb_constraints",
        "duckdb_indexes",
        "duckdb_functions",
        "duckdb_keywords",
    }
)
INFORMATION_SCHEMA = frozenset({"tables", "columns", "views", "schemata"})
# SHOW TABLES, SHOW ALL TABLES (SHOW DATABASES shows the file's path: refused).
SHOW_SPECIAL = frozenset({'"tables"', "__show_tables_expanded"})
# DuckDB marks these scalar functions as having side effects, yet they only draw random numbers,
# raise an error or describe the query itself. Every other function with side effects is refused
# (write_log, nextval, setval, setseed, sleep_ms, and whatever a later DuckDB adds).
HARMLESS_SIDE_EFFECTS = frozenset(
    {
        "random",
        "uuid",
        "uuidv4",
        "uuidv7",
        "gen_random_uuid",
        "error",
        "current_query",
        "current_query_id",
        "current_connection_id",
        "current_transaction_id",
        "stats",
        "vector_type",
    }
)


class QueryRefused(PermanentError):
    """The statement is not a single read-only query, or it failed: the message says why."""


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def statement_kind(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The one statement's type name; refuses empty input, several statements and bad syntax."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(first_line(exc)) from exc
    except ValueError as exc:  # a statement type the Python API has no name for
        raise QueryRefused(f"statement not allowed: only {ALLOWED_NAMES} may run") from exc
    if not statements:
        raise QueryRefused("no SQL statement given")
    if len(statements) > 1:
        raise QueryRefused(f"one statement at a time ({len(statements)} given)")
    return statements[0].type.name


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but one query over the store. EXPLAIN ANALYZE runs what it explains, so
    its statement is checked as well."""
    kind = statement_kind(con, sql)
    if kind not in {t.name for t in ALLOWED}:
        raise QueryRefused(f"{kind} statements are not allowed: only {ALLOWED_NAMES} may run")
    query = sql
    if kind == "EXPLAIN":
        query = explained(sql)
        inner_kind = statement_kind(con, query)
        if inner_kind != "SELECT":
            raise QueryRefused(
                f"EXPLAIN {inner_kind} is not allowed: only queries may be explained"
            )
    check_references(con, parse_tree(con, query))


def explained(sql: str) -> str:
    """The statement after EXPLAIN [ANALYZE] [(options)], found with DuckDB's tokenizer."""
    tokens = duckdb.tokenize(sql)
    i = 1
    if i < len(tokens) and sql[tokens[i][0] :].split(None, 1)[0].upper() in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(tokens) and sql[tokens[i][0]] == "(":
        depth = 0
        while i < len(tokens):
            char = sql[tokens[i][0]]
            depth += char == "("
            depth -= char == ")"
            i += 1
            if depth == 0:
                break
    return sql[tokens[i][0] :] if i < len(tokens) else ""


def parse_tree(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    """DuckDB's own parse of a SELECT, as JSON (json_serialize_sql)."""
    try:
        row = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    except duckdb.Error as exc:
        raise QueryRefused(first_line(exc)) from exc
    tree = orjson.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        raise QueryRefused(f"cannot check this query: {tree.get('error_message', 'no parse')}")
    return tree


def check_references(con: duckdb.DuckDBPyConnection, tree: dict[str, Any]) -> None:
    """Every table, table function and function the query names must be allowed."""
    database = store_database(con)
    tables = store_tables(con, database)
    ctes = {name.lower() for name in cte_names(tree)}
    for node in nodes(tree):
        kind = node.get("type")
        if kind == "TABLE_FUNCTION":
            check_table_function((node.get("function") or {}).get("function_name", "(unnamed)"))
        elif kind == "BASE_TABLE":
            check_table(node, database, tables, ctes)
        elif kind == "SHOW_REF":
            check_show(node, database, tables)
        elif node.get("class") in ("FUNCTION", "WINDOW") and "function_name" in node:
            check_function(node["function_name"])


def check_table_function(name: str) -> None:
    if name.lower() not in TABLE_FUNCTIONS:
        allowed = ", ".join(sorted(TABLE_FUNCTIONS))
        raise QueryRefused(
            f"table function {name} is not allowed: only the store's tables and views and"
            f" {allowed} may be read"
        )


def check_function(name: str) -> None:
    if name.lower() in side_effect_functions():
        raise QueryRefused(f"function {name} is not allowed: it has side effects")


def check_table(node: dict[str, Any], database: str, tables: set[str], ctes: set[str]) -> None:
    catalog, schema = node["catalog_name"].lower(), node["schema_name"].lower()
    name = node["table_name"].lower()
    if catalog in ("", database):
        if schema in ("", "main", database) and (name in tables or (not catalog and name in ctes)):
            return
        if schema == "information_schema" and name in INFORMATION_SCHEMA:
            return
    shown = ".".join(part for part in (catalog, schema, node["table_name"]) if part)
    raise QueryRefused(f"table {shown} is not allowed: only the store's tables and views")


def check_show(node: dict[str, Any], database: str, tables: set[str]) -> None:
    name = node["table_name"]
    if not name or (node["show_type"] == "SHOW_SPECIAL" and name.lower() in SHOW_SPECIAL):
        return  # DESCRIBE / SUMMARIZE of a query: the query itself is checked
    if node["show_type"] != "SHOW_SPECIAL":
        check_table(node, database, tables, set())
        return
    raise QueryRefused(f"SHOW {name.strip(chr(34)).upper()} is not allowed: SHOW TABLES is")


def nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object in the parse tree, depth first."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def cte_names(tree: dict[str, Any]) -> Iterator[str]:
    for node in nodes(tree):
        for entry in (node.get("cte_map") or {}).get("map", []):
            yield entry["key"]


def store_database(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("SELECT current_database()").fetchone()
    return str(row[0]).lower() if row else ""


def store_tables(con: duckdb.DuckDBPyConnection, database: str) -> set[str]:
    """The store's own tables and views (not DuckDB's system views, not other catalogs)."""
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE lower(database_name) = ?"
        " AND schema_name = 'main' UNION ALL SELECT view_name FROM duckdb_views()"
        " WHERE lower(database_name) = ? AND schema_name = 'main' AND NOT internal",
        [database, database],
    ).fetchall()
    return {str(name).lower() for (name,) in rows}


@functools.cache
def side_effect_functions() -> frozenset[str]:
    """The functions DuckDB itself marks as having side effects, less the harmless ones."""
    rows = duckdb.connect().execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE has_side_effects"
    )
    return frozenset(name for (name,) in rows.fetchall()) - HARMLESS_SIDE_EFFECTS
