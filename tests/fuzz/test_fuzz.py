"""The fuzz targets, run briefly from the captures' corpus as part of the test command; a crash
fails the test with the input that caused it (kept under the test's tmp folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.corpus import write_corpus

pytest.importorskip("atheris")  # wheels for Linux x86_64 only (see pyproject.toml)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# Runs each, kept short: the test command runs on two shared cores.
PATH = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
RUNS = {"fuzz_decoder.py": 1000, "fuzz_differential.py": 1000, "fuzz_assembly.py": 150}


@pytest.mark.parametrize("target", sorted(RUNS))
def test_the_fuzz_target_finds_no_crash(target: str, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    log = tmp_path / "fuzz.log"
    with log.open("w") as out:
        done = subprocess.run(
            [
                sys.executable,
                str(HERE / target),
                str(corpus),
                f"-runs={RUNS[target]}",
                "-max_total_time=20",
                "-seed=1",
                f"-artifact_prefix={artifacts}/",
            ],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *PATH])},
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=240,
            check=False,
        )
    text = log.read_text()
    crashes = sorted(p.name for p in artifacts.iterdir())
    assert done.returncode == 0 and not crashes, f"{crashes}\n{text[-4000:]}"
    assert "Done" in text  # it ran its inputs, not just started
