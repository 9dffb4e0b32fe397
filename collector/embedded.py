"""A whole pipeline in a background thread with its own event loop: for `sextant demo` and for
tests that talk to a real server in the same process."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

from collector.config import SextantConfig, load_config
from collector.pipeline import Pipeline
from collector.threads import name_os_thread, named_executor

LOOPBACK_EPHEMERAL = {
    "grpc": {"addr": "127.0.0.1:0"},
    "http": {"addr": "127.0.0.1:0"},
    "admin": {"addr": "127.0.0.1:0"},
}


def loopback_config(**sections: Any) -> SextantConfig:
    """Ports 0 on 127.0.0.1, then the given sections merged over them (no file, no env)."""
    overrides: dict[str, Any] = {k: dict(v) for k, v in LOOPBACK_EPHEMERAL.items()}
    for key, value in sections.items():
        overrides[key] = {**overrides.get(key, {}), **value} if isinstance(value, dict) else value
    return load_config(None, environ={}, overrides=overrides)


@dataclass
class Embedded:
    pipeline: Pipeline
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.pipeline.grpc.port}"

    @property
    def http_url(self) -> str:
        scheme = "https" if self.pipeline.config.http.tls else "http"
        return f"{scheme}://127.0.0.1:{self.pipeline.http.port}"

    @property
    def admin_url(self) -> str:
        scheme = "https" if self.pipeline.config.admin.tls else "http"
        return f"{scheme}://127.0.0.1:{self.pipeline.admin.port}"

    def stop(self) -> None:
        """Shut down (drain, flush, close the store) and wait for it."""
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(60)


def start(config: SextantConfig, timeout: float = 60.0) -> Embedded:
    started = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        name_os_thread()
        loop = asyncio.new_event_loop()
        loop.set_default_executor(named_executor("sextant-async"))
        asyncio.set_event_loop(loop)
        try:
            pipeline = Pipeline(config)
            box["pipeline"], box["loop"] = pipeline, loop
            loop.run_until_complete(pipeline.start())
        except BaseException as exc:
            box["error"] = exc
            started.set()
            loop.close()
            return
        started.set()
        loop.run_forever()
        loop.run_until_complete(pipeline.shutdown())
        loop.close()

    thread = threading.Thread(target=run, name="sextant-embedded", daemon=True)
    thread.start()
    started.wait(timeout)
    if "error" in box:
        raise box["error"]
    return Embedded(box["pipeline"], box["loop"], thread)
