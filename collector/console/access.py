"""Who may open the console: the token once at /login for a session cookie, a CSRF token on every
form, and no console at all on a non-loopback port without tokens unless `admin.console` says so.

A session is a random id the server maps to its expiry and its CSRF token; the cookie holds only
that id, never the token. Logging out forgets the id at once, and a restart forgets them all.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from aiohttp import web

from collector.admin.browser import UNSAFE, cross_site
from collector.admin.http import unauthorized
from collector.admin.throttle import FailedLogins
from collector.auth import BearerAuth
from collector.config.sections import AdminConfig
from collector.errors import Unauthenticated

COOKIE = "sextant_session"
CSRF_FIELD = "csrf"
MAX_SESSIONS = 10_000  # beyond, the oldest login is forgotten
# Reachable without a login: the login form itself and what it is styled with.
PUBLIC_PREFIXES = ("/login", "/static/")
NOT_SERVED = (
    "No console here: the admin port listens beyond loopback and auth.tokens is not set, so"
    " the console is off (admin.console: loopback). Bind admin.addr to 127.0.0.1, set"
    " auth.tokens, or set admin.console: always behind a proxy that authenticates people."
)
# What a page puts in its forms' hidden CSRF_FIELD: `request[CSRF]`, set by the gate.
CSRF = web.RequestKey("csrf", str)


@dataclass(frozen=True)
class Login:
    """A person signed in to the console: the cookie's id, the CSRF token its forms carry, and
    when it expires."""

    id: str
    csrf: str
    expires_at: float  # monotonic seconds
    name: str = ""  # the named token's holder; "" for a plain token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_path(target: str | None) -> str | None:
    """`next` as a path on this server, None for anything else ("/" when not given). Only
    printable ASCII without spaces: browsers drop tabs and newlines from a URL, so `/\t/host`
    would be `//host`, another site; and a control character cannot go in a header at all."""
    if not target:
        return "/"
    if not all("!" <= c <= "~" for c in target) or "\\" in target:
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return None
    return target


class ConsoleAccess:
    """The admin guard's gate for console paths (`admit`) and the sessions behind it."""

    def __init__(
        self,
        config: AdminConfig,
        auth: BearerAuth,
        monotonic: Callable[[], float],
        throttle: FailedLogins,
    ):
        self.auth = auth
        self.throttle = throttle
        self.monotonic = monotonic
        self.secure = config.tls is not None
        self.host = config.host_port[0]
        self.console = config.console
        self.lifetime = config.session_hours * 3600
        loopback = is_loopback(config.host_port[0])
        self.served = config.console == "always" or (
            config.console == "loopback" and (auth.enabled or loopback)
        )
        # Without tokens there are no sessions, yet forms still need a token another site
        # cannot read: one per process.
        self.open_csrf = secrets.token_urlsafe(32)
        self._sessions: dict[str, Login] = {}
        self._lock = threading.Lock()

    def where(self, port: int) -> str:
        """Where a browser on this machine opens the console, for the start-up log."""
        if self.served:
            return f"console on {self.url(port)}"
        if self.console == "off":
            return "console off (admin.console: off; set admin.console: loopback to serve it)"
        return (
            f"console off (admin.console: {self.console} on {self.host}, not loopback, without"
            " auth.tokens; set auth.tokens to serve it, or admin.console: always behind a proxy"
            " that authenticates people)"
        )

    def url(self, port: int) -> str:
        host = "localhost" if self.host in ("0.0.0.0", "::", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.secure else 'http'}://{host}:{port}/"

    # -- sessions --------------------------------------------------------------------------------

    def login(self, token: str) -> Login | None:
        """A new session for a configured token, or None."""
        try:
            name = self.auth.identify(f"Bearer {token}")
        except Unauthenticated:
            return None
        session = Login(
            secrets.token_urlsafe(32),
            secrets.token_urlsafe(32),
            self.monotonic() + self.lifetime,
            name,
        )
        with self._lock:
            while len(self._sessions) >= MAX_SESSIONS:
                del self._sessions[next(iter(self._sessions))]
            self._sessions[session.id] = session
        return session

    def logout(self, request: web.Request) -> None:
        session = self.session_of(request)
        if session is not None:
            with self._lock:
                self._sessions.pop(session.id, None)

    def session_of(self, request: web.Request) -> Login | None:
        sid = request.cookies.get(COOKIE)
        if not sid:
            return None
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None and session.expires_at <= self.monotonic():
                del self._sessions[sid]
                return None
        return session

    def csrf(self, request: web.Request) -> str:
        """The CSRF token a form on this request's page carries."""
        session = self.session_of(request)
        return session.csrf if session is not None else self.open_csrf

    def set_cookie(self, response: web.StreamResponse, session: Login) -> None:
        response.set_cookie(
            COOKIE,
            session.id,
            max_age=int(self.lifetime),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.secure,
        )

    # -- the gate --------------------------------------------------------------------------------

    async def admit(
        self, request: web.Request, failure: Unauthenticated | None, bearer: bool
    ) -> web.StreamResponse | None:
        if not self.served:
            return unauthorized(failure) if failure is not None else refusal(404, NOT_SERVED)
        if request.method in UNSAFE and cross_site(request):
            return refusal(403, "a form from another site is refused")
        request[CSRF] = self.csrf(request)
        if request.path.startswith(PUBLIC_PREFIXES):
            return None
        session = self.session_of(request)
        if failure is not None and session is None:
            if request.method == "GET" and "text/html" in request.headers.get("Accept", ""):
                back = local_path(request.path_qs) or "/"
                return see_other("/login?next=" + quote(back, safe=""))
            return unauthorized(failure)
        if request.method in UNSAFE and not bearer:
            # A cookie or a client certificate comes with any form, wherever it was served:
            # only a page of ours knows the CSRF token.
            sent = (await request.post()).get(CSRF_FIELD)
            if not isinstance(sent, str) or not hmac.compare_digest(sent, request[CSRF]):
                return refusal(403, "missing or wrong CSRF token: reload the page and try again")
        return None


def see_other(location: str) -> web.Response:
    """303: after a form, the browser GETs `location` (POST/redirect/GET)."""
    return web.Response(status=303, headers={"Location": location})


def refusal(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message)
