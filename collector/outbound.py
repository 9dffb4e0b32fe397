"""Redirects on the collector's outbound calls (judges, cluster peers, the command line's admin
client): followed only to the same origin.

A server that answers 307 elsewhere would otherwise be asked in its place: a judge's PASS counted
from a host nobody configured, a peer's rows shown as the peer's, and the bearer token sent on to
that host. A redirect to another origin is an error naming where it pointed; one within the
origin (a moved path on the same server) is followed, a few times at most.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from http.client import HTTPMessage
from typing import IO
from urllib.parse import urljoin, urlsplit

from collector.redact import shown_url

MAX_REDIRECTS = 3
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class CrossOriginRedirect(Exception):
    """A redirect to another origin, not followed."""

    def __init__(self, url: str, location: str, status: int) -> None:
        super().__init__(
            f"HTTP {status} from {shown_url(url)} redirects to another origin"
            f" ({origin(location) or '?'});"
            " redirects are followed only within the same scheme, host and port"
        )
        self.location = location


def origin(url: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) with the scheme's default port filled in."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    return parts.scheme.lower(), parts.hostname.lower(), port


def same_origin_target(url: str, location: str | None, status: int) -> str:
    """The absolute URL a redirect points to, if it stays within `url`'s origin; else raises
    CrossOriginRedirect (a missing Location counts as elsewhere)."""
    target = urljoin(url, location or "")
    if not location or origin(target) != origin(url):
        raise CrossOriginRedirect(url, target if location else "", status)
    return target


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handling, refusing redirects to other origins (urllib would otherwise
    send the request's Authorization header on to them)."""

    max_redirections = MAX_REDIRECTS

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        try:
            same_origin_target(req.full_url, newurl, code)
        except CrossOriginRedirect as exc:
            raise urllib.error.HTTPError(req.full_url, code, str(exc), headers, fp) from exc
        if req.data is not None and code in (301, 302, 303):
            # urllib would ask again with a GET and no body: an export or a query that
            # "succeeds" having sent nothing.
            message = f"HTTP {code} from {shown_url(req.full_url)} would turn the POST into a GET"
            raise urllib.error.HTTPError(req.full_url, code, message, headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def opener() -> urllib.request.OpenerDirector:
    """A urllib opener that follows redirects only within the origin."""
    return urllib.request.build_opener(SameOriginRedirects())
