"""Throttling of wrong tokens per client address, for the console's login and the API's bearer
check: a few mistakes are free, guessing is not."""

from __future__ import annotations

import ipaddress
import math
import threading
from collections import OrderedDict
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from collector.config.sections import AdminConfig

MAX_CLIENTS = 10_000  # clients remembered; beyond, one that is not throttled is forgotten first
IPV6_CLIENT_PREFIX = 64  # one IPv6 client holds a whole /64 and may send from any of it


class LoginMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.failures = Counter(
            "sextant_admin_auth_failures",
            "Admin port requests refused for their token (console login or API bearer), by"
            " reason: wrong_token, or throttled (the client sent too many wrong ones).",
            ["reason"],
            registry=registry,
        )
        for reason in ("wrong_token", "throttled"):
            self.failures.labels(reason)


class FailedLogins:
    """A token bucket per client address: `burst` wrong tokens, then one more every
    `refill_seconds`. While a client's bucket is empty every token it sends is refused unread,
    the right one too, so that its answers tell a guesser nothing."""

    def __init__(
        self,
        burst: int,
        refill_seconds: float,
        monotonic: Callable[[], float],
        metrics: LoginMetrics,
    ) -> None:
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.monotonic = monotonic
        self.metrics = metrics
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tries, at
        self._lock = threading.Lock()

    @classmethod
    def configured(
        cls, config: AdminConfig, monotonic: Callable[[], float], registry: CollectorRegistry
    ) -> FailedLogins:
        """admin.login_burst and admin.login_refill_seconds, counted in `registry`."""
        metrics = LoginMetrics(registry)
        return cls(config.login_burst, config.login_refill_seconds, monotonic, metrics)

    def _tries(self, client: str, now: float) -> float:
        tries, at = self._buckets.get(client, (float(self.burst), now))
        return min(float(self.burst), tries + (now - at) / self.refill_seconds)

    def wait_seconds(self, client: str) -> float | None:
        """How long `client` must wait before its next token is read; None: read it now. A
        refusal is counted as throttled."""
        with self._lock:
            tries = self._tries(client, self.monotonic())
        if tries >= 1:
            return None
        self.metrics.failures.labels("throttled").inc()
        return (1 - tries) * self.refill_seconds

    def failed(self, client: str) -> None:
        """`client` sent a wrong token."""
        self.metrics.failures.labels("wrong_token").inc()
        now = self.monotonic()
        with self._lock:
            self._buckets[client] = (self._tries(client, now) - 1, now)
            self._buckets.move_to_end(client)
            while len(self._buckets) > MAX_CLIENTS:
                self._forget_one(now)

    def _forget_one(self, now: float) -> None:
        """Forget the longest quiet refilled bucket (forgetting it changes nothing), else the
        longest quiet one still holding a try, and a throttled one only when all are: a flood of
        new addresses must not free a guesser's throttled bucket."""
        usable = None
        for client in self._buckets:
            tries = self._tries(client, now)
            if tries >= self.burst:
                usable = client
                break
            if usable is None and tries >= 1:
                usable = client
        if usable is None:
            self._buckets.popitem(last=False)
        else:
            del self._buckets[usable]


def client_of(request: web.Request) -> str:
    """The client behind the peer address (a proxy in front makes every person one client)."""
    return client_key(request.remote or "")


def client_key(address: str) -> str:
    """An IPv6 address's /64 (a host picks any address in it at will, a fresh one per try),
    an IPv4-mapped IPv6 address as the IPv4 address it is, other addresses as they are."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))
    return str(ip)


def too_many(wait: float) -> web.Response:
    response = web.json_response(
        {"error": f"too many wrong tokens from this address; try again in {wait:.0f} s"},
        status=429,
    )
    response.headers["Retry-After"] = retry_after(wait)
    return response


def retry_after(wait: float) -> str:
    """Whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(wait)))
