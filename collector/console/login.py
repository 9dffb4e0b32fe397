"""The console's login and logout: the token once in a form, a session cookie after."""

from __future__ import annotations

from aiohttp import web

from collector.admin.throttle import client_of, retry_after
from collector.console.access import (
    COOKIE,
    CSRF,
    CSRF_FIELD,
    ConsoleAccess,
    local_path,
    see_other,
)
from collector.console.render import page

BAD_NEXT = "next must be a path on this server (/decisions?state=firing, say), nothing else."


class LoginRoutes:
    """GET and POST /login, POST /logout."""

    def __init__(self, access: ConsoleAccess) -> None:
        self.access = access

    def register(self, app: web.Application) -> None:
        app.router.add_get("/login", self._form)
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)

    def _page(
        self, request: web.Request, next_path: str, status: int = 200, error: str = ""
    ) -> web.Response:
        return page(
            "login.html",
            status=status,
            nav="login",
            tokens=self.access.auth.enabled,
            signed_in=self.access.session_of(request) is not None,
            next=next_path,
            csrf=request[CSRF],
            csrf_field=CSRF_FIELD,
            error=error,
        )

    async def _form(self, request: web.Request) -> web.Response:
        next_path = local_path(request.query.get("next"))
        if next_path is None:
            return web.Response(status=400, text=BAD_NEXT)
        return self._page(request, next_path)

    async def _login(self, request: web.Request) -> web.Response:
        form = await request.post()
        asked = form.get("next")
        next_path = local_path(asked if isinstance(asked, str) else None)
        if next_path is None:
            return web.Response(status=400, text=BAD_NEXT)
        client = client_of(request)
        wait = self.access.throttle.wait_seconds(client)
        if wait is not None:
            refused = self._page(
                request, next_path, 429, f"Too many wrong tokens: wait {wait:.0f} s."
            )
            refused.headers["Retry-After"] = retry_after(wait)
            return refused
        token = form.get("token")
        session = self.access.login(token) if isinstance(token, str) and token else None
        if session is None:
            self.access.throttle.failed(client)
            return self._page(request, next_path, 401, "That is not one of the configured tokens.")
        response = see_other(next_path)
        self.access.set_cookie(response, session)
        return response

    async def _logout(self, request: web.Request) -> web.Response:
        self.access.logout(request)
        response = see_other("/login")
        response.del_cookie(COOKIE, path="/")
        return response
