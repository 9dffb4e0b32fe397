"""The console's login and logout: the token once in a form, a session cookie after."""

from __future__ import annotations

from aiohttp import web

from collector.console.access import (
    COOKIE,
    CSRF,
    CSRF_FIELD,
    ConsoleAccess,
    local_path,
    see_other,
)
from collector.console.render import page


class LoginRoutes:
    """GET and POST /login, POST /logout."""

    def __init__(self, access: ConsoleAccess) -> None:
        self.access = access

    def register(self, app: web.Application) -> None:
        app.router.add_get("/login", self._form)
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)

    def _page(
        self, request: web.Request, next_path: str | None, status: int = 200, error: str = ""
    ) -> web.Response:
        return page(
            "login.html",
            status=status,
            nav="login",
            tokens=self.access.auth.enabled,
            signed_in=self.access.session_of(request) is not None,
            next=local_path(next_path),
            csrf=request[CSRF],
            csrf_field=CSRF_FIELD,
            error=error,
        )

    async def _form(self, request: web.Request) -> web.Response:
        return self._page(request, request.query.get("next"))

    async def _login(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = form.get("token")
        session = self.access.login(token) if isinstance(token, str) and token else None
        asked = form.get("next")
        next_path = asked if isinstance(asked, str) else None
        if session is None:
            return self._page(request, next_path, 401, "That is not one of the configured tokens.")
        response = see_other(local_path(next_path))
        self.access.set_cookie(response, session)
        return response

    async def _logout(self, request: web.Request) -> web.Response:
        self.access.logout(request)
        response = see_other("/login")
        response.del_cookie(COOKIE, path="/")
        return response
