"""The native load client's copies of an export request (collector/native/fresh_copy.rs) are
the bytes `salted_copy` then `Restamp.fresh` make, the Python specification, for the same fresh
salt and the same moment."""

from __future__ import annotations

import os
import random
import time

import pytest

from collector.bench.grpc_load import fresh_copies
from collector.bench.runner import BenchOptions, payload_template
from collector.bench.traces import Restamp, salted_copy

HOUR = 3600 * 10**9


def python_copy(template: bytes, salt: bytes, restamp: Restamp, new: bytes, now_ns: int) -> bytes:
    return restamp.fresh(salted_copy(template, salt, new), now_ns)


@pytest.mark.parametrize("spans", [10, 512])
def test_native_copies_are_the_python_copies(spans: int) -> None:
    made_ns = time.time_ns()
    template, salt, sent = payload_template(BenchOptions(spans_per_request=spans))
    restamp = Restamp(template, made_ns, as_json=False)
    native = fresh_copies(template, salt, restamp)
    assert len(restamp.values) == 2 * sent  # every span's start and end
    rng = random.Random(5)
    for now_ns in (made_ns, made_ns + 1, made_ns + HOUR, made_ns - HOUR, time.time_ns()):
        new = rng.randbytes(8)
        expected = python_copy(template, salt, restamp, new, now_ns)
        assert expected != template
        assert native.copy(new, now_ns) == expected


def test_a_hex_salt_the_raw_pass_completes_is_replaced_as_python_replaces_it() -> None:
    """Python's second `replace` reads the first one's output: new raw bytes that happen to be
    the rest of the old salt's hex text make one more occurrence, replaced too."""
    salt = bytes.fromhex("0123456789abcdef")
    new = salt.hex()[8:].encode()  # 8 bytes, all ASCII hex digits
    template = b"\x0a" + salt.hex()[:8].encode() + salt + b"|conv-" + salt.hex().encode()
    restamp = Restamp(template, time.time_ns(), as_json=False)
    assert not len(restamp.values)
    expected = python_copy(template, salt, restamp, new, 0)
    assert expected.count(new.hex().encode()) == 2
    assert fresh_copies(template, salt, restamp).copy(new, 0) == expected


def test_a_salt_of_other_than_8_bytes_is_refused() -> None:
    template, salt, _ = payload_template(BenchOptions(spans_per_request=10))
    native = fresh_copies(template, salt, Restamp(template, time.time_ns(), as_json=False))
    with pytest.raises(ValueError, match="8 raw bytes"):
        native.copy(os.urandom(7), 0)
