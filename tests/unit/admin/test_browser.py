"""The names the admin port answers to, and the `next` paths its login follows."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from collector.admin.browser import allowed_hosts, host_allowed
from collector.admin.throttle import FailedLogins, LoginMetrics
from collector.auth import BearerAuth
from collector.config.access import host_name
from collector.config.sections import AdminConfig
from collector.console.access import ConsoleAccess, local_path

NAMES = allowed_hosts(
    "0.0.0.0", ["http://replica-1.replicas.svc:9464", "https://u@replica-2:9464/"], ["ops.example"]
)


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("LocalHost:9464", "localhost"),
        ("[::1]:9464", "::1"),
        ("ops.example.", "ops.example"),
        ("10.0.0.7", "10.0.0.7"),
        ("ops.example:x", "ops.example:x"),
    ],
)
def test_the_name_of_a_host_header(host: str, name: str) -> None:
    assert host_name(host) == name


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost:1", True),
        ("127.0.0.1:9464", True),
        ("[::1]:9464", True),
        ("10.1.2.3", True),
        ("replica-1.replicas.svc:9464", True),
        ("replica-2", True),
        ("ops.example:443", True),
        (None, True),
        ("rebind.evil.example:9464", False),
        ("localhost.evil.example", False),
        ("0.0.0.0.evil.example", False),
        ("replica-1", False),
    ],
)
def test_which_hosts_the_admin_port_answers_to(host: str | None, allowed: bool) -> None:
    assert host_allowed(host, NAMES) is allowed


@pytest.mark.parametrize(
    ("target", "path"),
    [
        (None, "/"),
        ("", "/"),
        ("/decisions?state=firing", "/decisions?state=firing"),
        ("/a%20b", "/a%20b"),
        ("/\t/evil", None),
        ("/\x7f", None),
        ("//evil", None),
        ("/\\evil", None),
        ("http://evil/", None),
        ("evil", None),
        ("/é", None),
    ],
)
def test_login_follows_only_plain_local_paths(target: str | None, path: str | None) -> None:
    assert local_path(target) == path


@pytest.mark.parametrize(
    ("admin", "told"),
    [
        ({"console": "off"}, "set admin.console: loopback"),
        ({"addr": "0.0.0.0:9464"}, "set auth.tokens to serve it"),
    ],
)
def test_the_start_up_line_of_a_console_that_is_off_names_the_setting(
    admin: dict[str, str], told: str
) -> None:
    logins = FailedLogins(3, 6.0, lambda: 0.0, LoginMetrics(CollectorRegistry()))
    access = ConsoleAccess(AdminConfig(**admin), BearerAuth([]), lambda: 0.0, logins)
    line = access.where(9464)
    assert line.startswith("console off") and told in line
    assert "http://" not in line  # no address that answers 404
