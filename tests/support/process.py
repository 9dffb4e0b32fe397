"""`sextant serve` as a child process, as an operator runs it, with the ports it logged."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

LISTEN = re.compile(r"(OTLP/gRPC|OTLP/HTTP|admin) listening on ([\d.]+):(\d+)")


class Serve:
    """A `sextant serve` child process and the ports it logged."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "collector.cli", "serve", *args],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stderr=subprocess.PIPE,
            text=True,
        )
        self.ports: dict[str, int] = {}
        self.lines: list[str] = []
        deadline = time.monotonic() + 60
        while len(self.ports) < 3 and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            if match := LISTEN.search(line):
                self.ports[match.group(1)] = int(match.group(3))
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(60)
        self._drain.join(5)
        return code

    @property
    def output(self) -> str:
        return "".join(self.lines)


EPHEMERAL = [
    "--grpc-addr",
    "127.0.0.1:0",
    "--http-addr",
    "127.0.0.1:0",
    "--admin-addr",
    "127.0.0.1:0",
]


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone while we looked
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie left for init to reap counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
