"""A TCP server that answers HTTP one header byte every few seconds, never finishing."""

from __future__ import annotations

import socket
import threading


class Trickler:
    """Accepts connections, reads the request, then sends `HTTP/1.1 200 OK` and an endless
    header a byte every `every` seconds: each read succeeds, so a per-read timeout never fires."""

    def __init__(self, every: float = 2.0) -> None:
        self.every = every
        self.stopped = threading.Event()
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not self.stopped.wait(self.every):
                    conn.sendall(b"a")
            except OSError:
                return

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()
