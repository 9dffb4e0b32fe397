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

from collector.outbound import MAX_REDIRECTS, REDIRECTS, CrossOriginRedirect, same_origin_target
from collector.redact import redact, shown_url
from evaluators.judge import JUDGEMENT_SCHEMA, JudgeEndpoint, Judgement, parse_judgement

SYSTEM = (
    "You are an evaluator. Answer only with a JSON object with the keys score (a number from 0"
    " to 1), label (one word) and explanation (one or two sentences)."
)


class Unavailable(Exception):
    """No judgement: `outcome` is timeout, rate_limited, provider_error or malformed. The
    message is stored and shown, so it never holds the key (`redact`)."""

    def __init__(self, outcome: str, message: str, key: str | None = None) -> None:
        super().__init__(redact(message, [key]))
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


def api_key(endpoint: JudgeEndpoint) -> str | None:
    if not endpoint.api_key_env:
        return None
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise Unavailable("provider_error", f"${endpoint.api_key_env} is not set")
    return key


def headers(endpoint: JudgeEndpoint) -> dict[str, str]:
    out = {"Content-Type": "application/json"}
    key = api_key(endpoint)
    if key:
        out["Authorization"] = f"Bearer {key}"
    return out


async def judge(
    session: aiohttp.ClientSession, endpoint: JudgeEndpoint, model: str, prompt: str
) -> Reply:
    """Ask once (no retry here: a retry spends budget, and the run is reviewed instead).
    Redirects are followed only within the endpoint's origin: a judgement from a host nobody
    configured is no judgement."""
    started = time.monotonic()
    key = api_key(endpoint)
    url = endpoint.base_url + "/chat/completions"
    try:
        async with asyncio.timeout(endpoint.timeout):
            status, body = await post(session, url, request_body(endpoint, model, prompt), endpoint)
    except TimeoutError as exc:
        raise Unavailable("timeout", f"no answer within {endpoint.timeout:g}s") from exc
    except aiohttp.ClientError as exc:
        raise Unavailable("provider_error", f"{type(exc).__name__}: {exc}", key) from exc
    except CrossOriginRedirect as exc:
        raise Unavailable("provider_error", str(exc), key) from exc
    seconds = time.monotonic() - started
    if status == 429:
        raise Unavailable("rate_limited", f"HTTP 429 from {shown_url(url)}: {quoted(body, key)}")
    if status >= 300:
        shown = shown_url(url)
        raise Unavailable("provider_error", f"HTTP {status} from {shown}: {quoted(body, key)}")
    return read_reply(body, seconds, key)


def quoted(body: bytes, key: str | None, chars: int = 200) -> str:
    """The start of an answer, for an error message: credentials taken out before it is cut,
    so that no piece of a key is left behind."""
    return repr(redact(body[: chars * 20].decode("utf-8", "replace"), [key])[:chars])


async def post(
    session: aiohttp.ClientSession, url: str, doc: dict, endpoint: JudgeEndpoint
) -> tuple[int, bytes]:
    """The status and body of the POST, after the redirects within the origin (307 and 308,
    which keep the method and body; others are answers)."""
    data = orjson.dumps(doc)
    for _ in range(MAX_REDIRECTS + 1):
        async with session.post(
            url, data=data, headers=headers(endpoint), allow_redirects=False
        ) as response:
            body = await response.read()
            if response.status not in REDIRECTS:
                return response.status, body
            target = same_origin_target(url, response.headers.get("Location"), response.status)
            if response.status not in (307, 308):
                return response.status, body
            url = target
    return response.status, body


def read_reply(body: bytes, seconds: float, key: str | None = None) -> Reply:
    try:
        doc = orjson.loads(body)
        content = doc["choices"][0]["message"]["content"]
        usage = doc.get("usage") or {}
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise Unavailable("malformed", f"not a chat completion: {quoted(body, key)}") from exc
    if not isinstance(content, str):
        raise Unavailable("malformed", "the message has no text content")
    try:
        judgement = parse_judgement(content)
    except ValueError as exc:
        raise Unavailable("malformed", f"judgement unreadable: {exc}", key) from exc
    return Reply(judgement, usage.get("prompt_tokens"), usage.get("completion_tokens"), seconds)
