"""The errors that choose a command's exit code beyond "it failed" (see EXIT_CODES)."""

from __future__ import annotations

from collector.errors import SextantError


class UsageError(SextantError):
    """A flag or a file the user named cannot be used (exit code 2)."""


class Unreachable(SextantError):
    """No answer from the collector or the store (exit code 3): nothing was asked of it yet."""


class NotFound(SextantError):
    """The collector answered 404: what was asked for is not there (exit code 1)."""
