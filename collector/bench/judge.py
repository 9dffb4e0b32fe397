"""A scripted OpenAI-compatible chat completions server: the stand-in for a hosted LLM judge,
which cannot run here (the tests' and the benchmark's). It answers by what the prompt holds, so
each run picks its own fate:

- `GOOD` / `BAD` in the prompt: a judgement with score 0.9 / 0.1 (labels helpful / unhelpful);
  a prompt with neither is judged unhelpful;
- `SLOW`: waits past any test's timeout; `HOLD`: waits until the test calls `release()`;
- `MALFORMED`: a message that is not JSON; `LIMITED`: HTTP 429; `BROKEN`: HTTP 500;
- `ECHO`: HTTP 500 quoting the request's headers (a proxy's debug page); `LEAK`: HTTP 401
  quoting the bare bearer token; `ELSEWHERE`: HTTP 307 to `redirect_to` (another server).

`delay` makes every answer that late: a slow judge, for the benchmark.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}


def judgement(score: float, label: str) -> dict[str, Any]:
    return {"score": score, "label": label, "explanation": f"scripted: {label}"}


@dataclass
class ScriptedJudge:
    server: ThreadingHTTPServer
    requests: list[dict[str, Any]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    delay: float = 0.0
    redirect_to: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def release(self) -> None:
        self.released.set()

    def prompts(self) -> list[str]:
        return [r["messages"][-1]["content"] for r in self.requests]

    def answer(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        prompt = body["messages"][-1]["content"]
        if "ECHO" in prompt:
            echoed = {"error": "upstream failed", "request_headers": headers}
            return 500, json.dumps(echoed).encode()
        if "LEAK" in prompt:
            token = headers.get("Authorization", "").removeprefix("Bearer ")
            return 401, f"invalid api key {token} for this project".encode()
        if "ELSEWHERE" in prompt and self.redirect_to:
            return 307, self.redirect_to.encode()
        if self.delay:
            time.sleep(self.delay)
        if "SLOW" in prompt:
            time.sleep(5)
        if "HOLD" in prompt:
            self.released.wait(30)
        if "LIMITED" in prompt:
            return 429, b'{"error": {"message": "rate limit"}}'
        if "BROKEN" in prompt:
            return 500, b'{"error": {"message": "internal"}}'
        if "MALFORMED" in prompt:
            content = "I think it is fine, 8/10"
        else:
            good = "GOOD" in prompt
            content = json.dumps(judgement(0.9, "helpful") if good else judgement(0.1, "unhelpful"))
        reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": USAGE,
        }
        return 200, json.dumps(reply).encode()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def start_judge(delay: float = 0.0) -> ScriptedJudge:
    scripted: ScriptedJudge

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with scripted.lock:
                scripted.requests.append(
                    {**body, "authorization": self.headers.get("Authorization")}
                )
                scripted.in_flight += 1
            try:
                status, payload = scripted.answer(body, dict(self.headers.items()))
            finally:
                with scripted.lock:
                    scripted.in_flight -= 1
            self.send_response(status)
            if status == 307:
                self.send_header("Location", payload.decode() + "/chat/completions")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    scripted = ScriptedJudge(server, delay=delay)
    threading.Thread(target=server.serve_forever, name="scripted-judge", daemon=True).start()
    return scripted
