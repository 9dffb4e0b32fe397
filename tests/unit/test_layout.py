"""The house rules a newcomer relies on to find a behaviour's home, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("collector/**/*.py"), *ROOT.glob("evaluators/**/*.py")])
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Functions that are data tables (metric catalogues, scripted fixtures), not logic.
DATA_TABLES = {
    ("collector/assembler/metrics.py", "AssemblerMetrics.__init__"),
    ("collector/bench/traces.py", "agent_trace"),
}


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node.name, node))
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.append((f"{node.name}.{item.name}", item))
    return found


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_no_module_is_over_400_lines() -> None:
    long = {rel(p): n for p in SOURCES if (n := p.read_text().count("\n")) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_60_lines_outside_data_tables() -> None:
    long = {
        (rel(p), name): f.end_lineno - f.lineno + 1
        for p in SOURCES
        for name, f in functions(parsed(p))
        if f.end_lineno and f.end_lineno - f.lineno + 1 > MAX_FUNCTION_LINES
    }
    assert {k: v for k, v in long.items() if k not in DATA_TABLES} == {}


def test_evaluators_import_nothing_from_the_collector() -> None:
    offenders = [
        rel(p)
        for p in ROOT.glob("evaluators/**/*.py")
        for node in ast.walk(parsed(p))
        if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("collector"))
        or (
            isinstance(node, ast.Import) and any(a.name.startswith("collector") for a in node.names)
        )
    ]
    assert offenders == []


def test_no_private_module_or_name_is_imported_across_packages() -> None:
    offenders = []
    for path in SOURCES:
        package = path.parent.relative_to(ROOT).as_posix().replace("/", ".")
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            parts = node.module.split(".")
            private = [
                i
                for i, part in enumerate(parts)
                if part.startswith("_") and not part.startswith("__")
            ]
            if private and ".".join(parts[: private[0]]) != package:
                offenders.append(f"{rel(path)}: {node.module}")
            for alias in node.names:
                # a package's own private modules and names are its business
                if node.module == package:
                    continue
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    offenders.append(f"{rel(path)}: {node.module}.{alias.name}")
    assert offenders == []


def test_no_private_attribute_of_another_object_is_read() -> None:
    offenders = [
        f"{rel(p)}:{node.lineno}: {ast.unparse(node)}"
        for p in SOURCES
        for node in ast.walk(parsed(p))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        and not (isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "super")
    ]
    assert offenders == []
