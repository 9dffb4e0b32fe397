"""Which redirects the collector's outbound calls follow: within the origin only."""

from __future__ import annotations

import pytest

from collector.outbound import CrossOriginRedirect, same_origin_target

BASE = "http://judge.internal:8000/v1/chat/completions"


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("/v2/chat/completions", "http://judge.internal:8000/v2/chat/completions"),
        ("completions2", "http://judge.internal:8000/v1/chat/completions2"),
        ("http://JUDGE.internal:8000/x", "http://JUDGE.internal:8000/x"),
    ],
)
def test_a_redirect_within_the_origin_is_followed(location: str, target: str) -> None:
    assert same_origin_target(BASE, location, 307) == target


@pytest.mark.parametrize(
    "location",
    [
        "http://judge.internal:8001/v1/chat/completions",  # another port
        "https://judge.internal:8000/v1/chat/completions",  # another scheme
        "http://evil.example/v1/chat/completions",
        "//evil.example/v1",  # scheme-relative
        "",  # no Location at all
        None,
    ],
)
def test_a_redirect_elsewhere_is_refused(location: str | None) -> None:
    with pytest.raises(CrossOriginRedirect, match="another origin"):
        same_origin_target(BASE, location, 307)


def test_default_ports_are_the_same_origin() -> None:
    assert same_origin_target("https://a.example/x", "https://a.example:443/y", 308)
