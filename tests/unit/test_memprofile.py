"""SEXTANT_MEMORY_PROFILE: what the main process's memory is made of, reported over time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

# In a process of its own: tracing is process-wide, and the report thread runs forever.
RUN = textwrap.dedent(
    """
    import threading
    from collector import memprofile

    held = []
    thread = memprofile.start_from_environment()
    memprofile.add_source(lambda: "store 1 MiB")
    done = threading.Event()
    for _ in range(3):
        held.append(bytearray(8 * 1024 * 1024))  # grows between reports
        done.wait(0.3)
    """
)


def test_reports_rss_each_allocator_and_what_grew(tmp_path: Path) -> None:
    out, script = tmp_path / "memory.txt", tmp_path / "grows.py"
    script.write_text(RUN)
    env = dict(os.environ, SEXTANT_MEMORY_PROFILE=str(out), SEXTANT_MEMORY_PROFILE_SECONDS="0.2")
    subprocess.run([sys.executable, str(script)], check=True, env=env, timeout=60)
    text = out.read_text()
    reports = text.split("== ")[1:]
    assert len(reports) >= 2
    assert "RSS" in reports[0] and "Arrow" in reports[0] and "Python traced" in reports[0]
    assert "glibc malloc: in use" in reports[0]
    assert "store 1 MiB" in reports[0]
    # a later report names the line whose allocations grew since the first
    assert any("bytearray(8 * 1024 * 1024)" in r for r in reports[1:])


def test_off_unless_asked() -> None:
    from collector import memprofile

    env_before = os.environ.pop(memprofile.PROFILE_ENV, None)
    try:
        assert memprofile.start_from_environment() is None
        assert not memprofile.enabled()
    finally:
        if env_before is not None:
            os.environ[memprofile.PROFILE_ENV] = env_before
