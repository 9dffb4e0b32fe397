"""Windows a service's runs are split over replicas for: when the gateway's ring changes (a
replica added, removed, not ready for a while), a service moves, and for one window each side
holds only part of its runs. A verdict on part of a sample is not made: the window result of a
service that another replica also has runs of inside the window is a review
(`coverage_resharded`), on both sides.

The peers (`cluster.peers`) are asked once per rule evaluation. A peer that does not answer
cannot say: the results stand and the miss is logged (counted as an error of the check).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from collector.cluster import peer_rows, replica_name
from collector.drift.outcome import WindowOutcome
from evaluators.base import Verdict

log = logging.getLogger(__name__)
# Per service asked about: its runs on the peer inside the span of the windows looked at.
ELSEWHERE = """
SELECT coalesce(service_name, '') AS service, min(closed_at) AS first, max(closed_at) AS last
FROM trajectories
WHERE closed_at >= ?::TIMESTAMP AND closed_at < ?::TIMESTAMP AND coalesce(service_name, '') IN ?
GROUP BY ALL
"""


def resharded(
    outcomes: list[WindowOutcome], peers: list[str], token: str | None
) -> list[WindowOutcome]:
    """The outcomes, a verdict on a window that a peer also holds runs of the service for
    turned into a review."""
    judged = [o for o in outcomes if o.verdict != Verdict.REVIEW]
    if not judged or not peers:
        return outcomes
    since = min(o.window_start for o in judged)
    until = max(o.window_end for o in judged)
    services = sorted({o.target.service or "" for o in judged})
    elsewhere: dict[str, list[tuple[str, datetime, datetime]]] = {}
    for peer in peers:
        try:
            rows = peer_rows(peer, token, ELSEWHERE, [since, until, services])
        except (OSError, ValueError) as exc:
            log.warning("resharding check: peer %s did not answer: %s", replica_name(peer), exc)
            continue
        for row in rows:
            elsewhere.setdefault(row["service"], []).append(
                (replica_name(peer), parse(row["first"]), parse(row["last"]))
            )
    return [split(o, elsewhere.get(o.target.service or "", [])) for o in outcomes]


def parse(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value.rstrip("Z"))


def split(o: WindowOutcome, elsewhere: list[tuple[str, datetime, datetime]]) -> WindowOutcome:
    if o.verdict == Verdict.REVIEW:
        return o
    for peer, first, last in elsewhere:
        if first < o.window_end and last >= o.window_start:
            return replace(
                o,
                verdict=Verdict.REVIEW,
                reason="coverage_resharded",
                message=f"{o.target.service} has runs on {peer} too inside this window (it moved"
                f" between replicas): only part of its sample is here; would be {o.verdict}:"
                f" {o.message}",
            )
    return o
