"""Start an aiohttp application on a socket we bind ourselves, so errors and ports are clear."""

from __future__ import annotations

import socket
import ssl
from typing import Any

from aiohttp import web

from collector.errors import StartupError


def bind(host: str, port: int, what: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {host}:{port} for {what}: {exc.strerror}") from exc
    sock.setblocking(False)
    return sock


class HttpServer:
    """An aiohttp app bound to one address, TLS when given a context; `shutdown` lets in-flight
    requests finish."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        what: str,
        shutdown_timeout: float,
        ssl_context: ssl.SSLContext | None = None,
        **handler_args: Any,
    ) -> None:
        self.app = app
        self.ssl_context = ssl_context
        self.shutdown_timeout = shutdown_timeout
        self.handler_args = handler_args
        self.host = host
        self.port = port
        self.what = what
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        sock = bind(self.host, self.port, self.what)
        self.port = sock.getsockname()[1]
        self.runner = web.AppRunner(
            self.app,
            access_log=None,
            shutdown_timeout=self.shutdown_timeout,
            handle_signals=False,
            **self.handler_args,
        )
        await self.runner.setup()
        await web.SockSite(self.runner, sock, ssl_context=self.ssl_context).start()

    async def shutdown(self, deadline: float) -> None:
        """Stop listening; in-flight requests get the grace given at construction (aiohttp
        fixes it when the runner is made; the pipeline gives its whole shutdown timeout)."""
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
