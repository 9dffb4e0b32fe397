"""Bearer-token check shared by the OTLP receivers and the admin API."""

from __future__ import annotations

import hmac

from collector.errors import Unauthenticated


class BearerAuth:
    """Accepts `Authorization: Bearer <token>` for any configured token, compared in constant time.

    Every token is compared (no early exit) so timing does not tell which one nearly matched.
    """

    def __init__(self, tokens: list[str], names: dict[str, str] | None = None) -> None:
        self._tokens = [t.encode() for t in tokens]
        # the holder of each named token, in the order of `tokens` ("" for a plain one)
        self._names = [(names or {}).get(t, "") for t in tokens]

    @property
    def tokens(self) -> list[bytes]:
        """The tokens accepted (none: every request passes), for the native gRPC listener."""
        return list(self._tokens)

    @property
    def enabled(self) -> bool:
        """False when no token is configured: every request passes."""
        return bool(self._tokens)

    def check(self, header: str | None) -> None:
        self.identify(header)

    def identify(self, header: str | None) -> str:
        """Checks the header as `check` does; returns the name the matching token carries
        ("" for a plain token, or when no token is configured)."""
        if not self._tokens:
            return ""
        if not header:
            raise Unauthenticated("missing Authorization header (expected 'Bearer <token>')")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("Authorization must use the Bearer scheme")
        candidate = token.strip().encode()
        matched, name = False, ""
        for known, holder in zip(self._tokens, self._names, strict=True):
            equal = hmac.compare_digest(candidate, known)
            matched |= equal
            name = holder if equal else name
        if not matched:
            raise Unauthenticated("invalid bearer token")
        return name
