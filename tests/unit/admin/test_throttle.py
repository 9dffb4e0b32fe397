"""Wrong-token throttling per client: what counts as one client, and who is forgotten when
too many are remembered."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from collector.admin import throttle
from collector.admin.throttle import FailedLogins, LoginMetrics, client_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def logins(clock: Clock, burst: int = 3) -> FailedLogins:
    return FailedLogins(burst, 60.0, clock, LoginMetrics(CollectorRegistry()))


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:1:2:3", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("192.0.2.7", "192.0.2.7"),
        ("", ""),
    ],
)
def test_a_client_is_its_ipv6_64_or_its_ipv4_address(address: str, key: str) -> None:
    assert client_key(address) == key


def test_rotating_through_an_ipv6_64_does_not_dodge_the_throttle() -> None:
    clock = Clock()
    failed = logins(clock)
    for n in range(3):
        failed.failed(client_key(f"2001:db8:1:2::{n + 1:x}"))
    assert failed.wait_seconds(client_key("2001:db8:1:2:dead:beef:0:1")) is not None
    assert failed.wait_seconds(client_key("2001:db8:1:3::1")) is None  # the next /64 is not


def test_a_flood_of_new_addresses_does_not_free_a_throttled_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(throttle, "MAX_CLIENTS", 5)
    clock = Clock()
    failed = logins(clock)
    for _ in range(3):
        failed.failed("198.51.100.9")  # the guesser: throttled
    assert failed.wait_seconds("198.51.100.9") is not None
    for n in range(50):  # then one wrong token from each of many new addresses
        clock.now += 1
        failed.failed(f"203.0.113.{n}")
    assert failed.wait_seconds("198.51.100.9") is not None


def test_refilled_clients_are_forgotten_before_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throttle, "MAX_CLIENTS", 2)
    clock = Clock()
    failed = logins(clock, burst=2)
    failed.failed("192.0.2.1")  # oldest, refilled by the time the table is full
    clock.now += 120
    failed.failed("192.0.2.2")
    failed.failed("192.0.2.2")  # throttled
    failed.failed("192.0.2.3")
    assert list(failed._buckets) == ["192.0.2.2", "192.0.2.3"]
