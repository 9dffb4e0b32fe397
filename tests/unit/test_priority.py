"""The gRPC listener's threads ahead of the others for the CPU (collector/priority.py), in a
child process: nice values are per process and inherited, and the test's own must not move."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import json, os, threading
    from collector.priority import behind_the_listener
    from collector.threads import name_os_thread

    def nice():
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    seen, go = {}, threading.Event()
    named = [threading.Event(), threading.Event()]

    def listener():
        name_os_thread("sextant-grpc")
        named[0].set()
        go.wait()
        seen["listener"] = nice()

    def worker():
        name_os_thread("sextant-writer")
        named[1].set()
        go.wait()
        seen["writer"] = nice()

    threads = [threading.Thread(target=t) for t in (listener, worker)]
    for t in threads:
        t.start()
    for e in named:
        e.wait()
    before = nice()
    changed = behind_the_listener(NICE, keep=threading.get_native_id())
    go.set()
    for t in threads:
        t.join()
    later = threading.Thread(target=lambda: seen.__setitem__("later", nice()))
    later.start()
    later.join()
    seen.update(before=before, main=nice(), changed=changed)
    print(json.dumps(seen))
    """
)


def run(nice: int) -> dict[str, int]:
    script = CHILD.replace("NICE", str(nice))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, int] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice: Linux")
def test_every_thread_but_the_listeners_runs_behind_them() -> None:
    seen = run(5)
    base = seen["before"]
    assert seen["listener"] == base
    # the writer behind; the thread kept (the event loop's), and those it starts later, not
    assert seen["writer"] == min(base + 5, 19)
    assert seen["main"] == seen["later"] == base
    assert seen["changed"] >= 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice: Linux")
def test_zero_leaves_every_thread_alike() -> None:
    seen = run(0)
    assert seen["changed"] == 0
    assert seen["listener"] == seen["writer"] == seen["main"] == seen["before"]
