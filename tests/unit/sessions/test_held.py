"""The sessions' turns kept for the guard: what the stage made is never replaced by an older
read of the store, and the least recently asked are let go."""

from __future__ import annotations

from collector.sessions.held import HeldSessions, SessionTurns

OLD = SessionTurns(("t1",), [])
NEW = SessionTurns(("t1", "t2"), [])


def test_a_read_from_the_store_does_not_replace_what_the_stage_made() -> None:
    held = HeldSessions(2)
    held.put(("conv", "shop"), NEW)
    held.offer(("conv", "shop"), OLD)  # read before the stage made the session
    assert held.get(("conv", "shop")) == NEW
    held.offer(("other", "shop"), OLD)
    assert held.get(("other", "shop")) == OLD
    held.put(("other", "shop"), NEW)  # the stage made it again
    assert held.get(("other", "shop")) == NEW


def test_the_least_recently_asked_session_is_let_go() -> None:
    held = HeldSessions(2)
    held.put(("a", "shop"), OLD)
    held.put(("b", "shop"), OLD)
    held.get(("a", "shop"))
    held.put(("c", "shop"), OLD)
    assert [held.get((k, "shop")) is not None for k in "abc"] == [True, False, True]
    assert SessionTurns(("t0", "t1"), []).truncated


def test_no_session_is_kept_until_a_guard_asks_for_them() -> None:
    held = HeldSessions()
    held.put(("a", "shop"), OLD)
    assert held.get(("a", "shop")) is None
    held.keep(1)
    held.put(("a", "shop"), OLD)
    assert held.get(("a", "shop")) == OLD
