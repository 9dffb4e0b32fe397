"""The `sextant` command run in-process, with its exit code and what it printed."""

from __future__ import annotations

import pytest


def sextant_streams(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `sextant *args` in-process: its exit code, its stdout and its stderr."""
    from collector import cli

    with pytest.raises(SystemExit) as exited:
        cli.main(list(args))
    out = capsys.readouterr()
    return exited.value.code, out.out, out.err


def sextant(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run `sextant *args` in-process: its exit code and everything it printed."""
    code, out, err = sextant_streams(capsys, *args)
    return code, out + err
