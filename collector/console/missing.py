"""What the console answers for an address it does not serve: its own page, in its layout, with
the ways back (the API's unknown paths answer JSON instead, collector.admin.http)."""

from __future__ import annotations

from aiohttp import web

from collector.console.render import page


def not_found_page(request: web.Request) -> web.Response:
    """404 in the console's layout; the path is shown as text, as every stored value is."""
    return page("not_found.html", status=404, nav="", path=request.path)
