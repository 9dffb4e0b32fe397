"""The one target cap: who keeps their labels, who shares `_overflow`, when a place frees."""

from __future__ import annotations

from collector.clock import FakeClock
from collector.targets import OVERFLOW, TargetCap

A, B, C = ("svc", "agent", "1"), ("svc", "agent", "2"), ("svc", "agent", "3")


def test_the_first_targets_keep_their_labels_and_the_rest_share_overflow() -> None:
    cap = TargetCap(2, idle_seconds=60, clock=FakeClock())
    assert [cap.shown(t) for t in (A, B, C, A, C)] == [A, B, OVERFLOW, A, OVERFLOW]
    assert len(cap) == 2


def test_an_idle_target_gives_its_place_up_when_a_new_one_needs_it() -> None:
    clock = FakeClock()
    cap = TargetCap(2, idle_seconds=60, clock=clock)
    released: list[tuple[str, str, str]] = []
    cap.on_release(released.append)
    cap.shown(A)
    clock.advance(30)
    cap.shown(B)
    clock.advance(40)  # A last ran 70 s ago, B 40 s ago
    assert cap.shown(C) == C
    assert released == [A]
    assert cap.shown(A) == OVERFLOW  # back, but B and C hold the places now


def test_a_target_last_active_long_ago_does_not_hold_a_place_against_a_new_one() -> None:
    clock = FakeClock()
    cap = TargetCap(1, idle_seconds=60, clock=clock)
    assert cap.shown(A, active_at=clock.now()) == A
    clock.advance(61)
    assert cap.shown(B) == B
    assert cap.shown(A, active_at=clock.now()) == OVERFLOW


def test_nothing_is_released_while_every_place_is_in_use() -> None:
    clock = FakeClock()
    cap = TargetCap(1, idle_seconds=60, clock=clock)
    released: list[tuple[str, str, str]] = []
    cap.on_release(released.append)
    cap.shown(A)
    for _ in range(5):
        clock.advance(20)
        cap.shown(A)
        assert cap.shown(B) == OVERFLOW
    assert released == []
