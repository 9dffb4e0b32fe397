"""Who is asking, by name: the person an authenticating proxy names (admin.user_header, read
only when configured), else the holder of a named token, sent as a bearer token or used to sign
in to the console. "" is someone without a name, who may look but not claim or label."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from collector.auth import BearerAuth
from collector.config.access import reviewer_name
from collector.errors import Unauthenticated


class Identities:
    def __init__(
        self,
        auth: BearerAuth,
        user_header: str | None,
        signed_in: Callable[[web.Request], str] = lambda request: "",
    ) -> None:
        self.auth = auth
        self.user_header = user_header
        self.signed_in = signed_in  # the console login's name

    def who(self, request: web.Request) -> str:
        if self.user_header is not None:
            named = request.headers.get(self.user_header, "")
            try:
                return reviewer_name(named)
            except ValueError:
                pass  # not set, or not a name: no one the proxy vouches for
        bearer = request.headers.get("Authorization")
        if bearer and self.auth.enabled:
            try:
                return self.auth.identify(bearer)
            except Unauthenticated:
                return ""
        return self.signed_in(request)
