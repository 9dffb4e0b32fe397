"""One chat completion from an OpenAI-compatible server, asked for a judgement as JSON.

Every way a call can go wrong ends in `Unavailable` with an outcome a metric can count; the
caller turns it into a `review` (judge_unavailable), never into a verdict.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

import aiohttp
import orjson

from evaluators.judge import JUDGEMENT_SCHEMA, JudgeEndpoint, Judgement, parse_judgement

SYSTEM = (
    "You are an evaluator. Answer only with a JSON object with the keys score (a number from 0"
    " to 1), label (one word) and explanation (one or two sentences)."
)


class Unavailable(Exception):
    """No judgement: `outcome` is timeout, rate_limited, provider_error or malformed."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class Reply:
    judgement: Judgement
    input_tokens: int | None
    output_tokens: int | None
    seconds: float


def request_body(endpoint: JudgeEndpoint, model: str, prompt: str) -> dict:
    return {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": endpoint.max_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "judgement", "strict": True, "schema": JUDGEMENT_SCHEMA},
        },
    }


def headers(endpoint: JudgeEndpoint) -> dict[str, str]:
    out = {"Content-Type": "application/json"}
    if endpoint.api_key_env:
        key = os.environ.get(endpoint.api_key_env)
        if not key:
            raise Unavailable("provider_error", f"${endpoint.api_key_env} is not set")
        out["Authorization"] = f"Bearer {key}"
    return out


async def judge(
    session: aiohttp.ClientSession, endpoint: JudgeEndpoint, model: str, prompt: str
) -> Reply:
    """Ask once (no retry here: a retry spends budget, and the run is reviewed instead)."""
    started = time.monotonic()
    url = endpoint.base_url + "/chat/completions"
    try:
        async with asyncio.timeout(endpoint.timeout):
            async with session.post(
                url,
                data=orjson.dumps(request_body(endpoint, model, prompt)),
                headers=headers(endpoint),
            ) as response:
                body = await response.read()
    except TimeoutError as exc:
        raise Unavailable("timeout", f"no answer within {endpoint.timeout:g}s") from exc
    except aiohttp.ClientError as exc:
        raise Unavailable("provider_error", f"{type(exc).__name__}: {exc}") from exc
    seconds = time.monotonic() - started
    if response.status == 429:
        raise Unavailable("rate_limited", f"HTTP 429 from {url}: {body[:200]!r}")
    if response.status >= 400:
        raise Unavailable("provider_error", f"HTTP {response.status} from {url}: {body[:200]!r}")
    return read_reply(body, seconds)


def read_reply(body: bytes, seconds: float) -> Reply:
    try:
        doc = orjson.loads(body)
        content = doc["choices"][0]["message"]["content"]
        usage = doc.get("usage") or {}
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise Unavailable("malformed", f"not a chat completion: {body[:200]!r}") from exc
    if not isinstance(content, str):
        raise Unavailable("malformed", "the message has no text content")
    try:
        judgement = parse_judgement(content)
    except ValueError as exc:
        raise Unavailable("malformed", f"judgement unreadable: {exc}") from exc
    return Reply(judgement, usage.get("prompt_tokens"), usage.get("completion_tokens"), seconds)
