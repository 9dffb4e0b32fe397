"""Bearer-token check shared by the OTLP receivers and the admin API."""

from __future__ import annotations

import hmac

from collector.errors import Unauthenticated


class BearerAuth:
    """Accepts `Authorization: Bearer <token>` for any configured token, compared in constant time.

    Every token is compared (no early exit) so timing does not tell which one nearly matched.
    """

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = [t.encode() for t in tokens]

    @property
    def enabled(self) -> bool:
        """False when no token is configured: every request passes."""
        return bool(self._tokens)

    def check(self, header: str | None) -> None:
        if not self._tokens:
            return
        if not header:
            raise Unauthenticated("missing Authorization header (expected 'Bearer <token>')")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("Authorization must use the Bearer scheme")
        candidate = token.strip().encode()
        matched = False
        for known in self._tokens:
            matched |= hmac.compare_digest(candidate, known)
        if not matched:
            raise Unauthenticated("invalid bearer token")
