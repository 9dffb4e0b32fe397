"""What the command line says when something is wrong: the exit code docs/cli.md's table
gives and a message that tells what to do next (the flag meant, the token, the address to check)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.cli import sextant, sextant_streams
from tests.support.server import start_server

TOKEN = "cli-messages-t0ken-0123456789"  # auth.tokens wants 16+ characters


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_pack_path_that_does_not_exist_is_a_usage_error(tmp_path: Path, capsys) -> None:
    code, out = sextant(capsys, "rules", "validate", str(tmp_path / "nonexistent"))
    assert code == 2 and "nonexistent: no such file or directory" in out


def test_a_wrong_sub_command_lists_the_sub_commands_by_name(capsys) -> None:
    code, out = sextant(capsys, "decisions", "wrong")
    assert code == 2
    assert "(choose from 'show', 'ack', 'resolve')" in out and "Event" not in out
    assert "did you mean" not in out  # nothing is close to `wrong`
    code, out = sextant(capsys, "decisions", "akc")
    assert code == 2 and "did you mean 'ack'?" in out
    code, out = sextant(capsys, "trajectorys")
    assert code == 2 and "did you mean 'trajectories'?" in out


@pytest.mark.parametrize(
    ("args", "usage", "meant"),
    [
        (("trajectories", "--verdcit", "fail"), "usage: sextant trajectories", "--verdict"),
        (
            ("decisions", "ack", "x", "--by", "ana", "--nte", "x"),
            "usage: sextant decisions ack",
            "--note",
        ),
        (("rules", "validate", "rules/", "--fromat=json"), "usage: sextant rules validate", None),
    ],
)
def test_a_misspelt_flag_shows_its_commands_usage_and_the_flag_meant(
    capsys, args: tuple[str, ...], usage: str, meant: str | None
) -> None:
    code, out, err = sextant_streams(capsys, *args)
    assert code == 2 and out == ""
    assert usage in err and "usage: sextant [-h]" not in err
    assert f"unrecognized arguments: {args[-2] if meant else args[-1]}" in err
    if meant:
        assert f"did you mean {meant}?" in err
    else:  # validate has no --format: nothing close enough is suggested
        assert "did you mean" not in err


def test_an_unreachable_collector_is_named_with_how_to_check_it(capsys) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, out = sextant(capsys, "decisions", "--url", url)
    assert code == 3
    assert f"cannot reach {url} (" in out and "/api/v1/" not in out
    assert f"curl {url}/healthz" in out and "$SEXTANT_URL" in out


def test_sextant_url_names_the_collector(tmp_path: Path, capsys, monkeypatch) -> None:
    server = start_server(tmp_path, auth={"tokens": [TOKEN]})
    try:
        monkeypatch.setenv("SEXTANT_URL", server.admin_url)
        monkeypatch.setenv("SEXTANT_TOKEN", TOKEN)
        code, out = sextant(capsys, "decisions")
        assert code == 0 and "no decisions" in out
        code, out = sextant(capsys, "decisions", "--help")
        assert "$SEXTANT_URL when set" in out
        # a 401 says which flag or variable carries the token
        monkeypatch.delenv("SEXTANT_TOKEN")
        code, out = sextant(capsys, "decisions")
        assert code == 1 and "HTTP 401" in out
        assert "pass --token TOKEN or set $SEXTANT_TOKEN" in out
        code, out = sextant(capsys, "decisions", "--token", "not-it")
        assert code == 1 and "HTTP 401" in out
        assert "the token from --token or $SEXTANT_TOKEN is not one of" in out
    finally:
        server.stop()


def test_bench_where_every_request_fails_says_so(capsys) -> None:
    endpoint = f"127.0.0.1:{closed_port()}"
    code, out, err = sextant_streams(capsys, "bench", "--endpoint", endpoint, "--duration", "1s")
    assert code == 1
    assert "nan" not in out and "every request failed" in out
    assert "sextant bench: every request failed" in err and f"--endpoint {endpoint}" in err
