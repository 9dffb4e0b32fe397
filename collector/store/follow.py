"""Following a table of the store: its new rows in the order they were stored, each looked at
once, however many share a commit or a timestamp.

The stages that read what others stored (evaluation events from `logs`; judges and sessions
from `trajectories`) keep a `Follow` each. A row's `store_seq` is assigned as it is inserted
and the one lane of the writer that writes its table commits in order
(collector/store/schema.py), so "the rows numbered past
the last one looked at" misses nothing: a timestamp cursor does (every row of one commit shares
its `received_at`, and runs close out of order), and a batch limit cut inside one timestamp
skipped the rest of the commit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

# SQL of a followed table's new rows, for a query's WHERE clause and its end: the rows after
# the cursor that are also within the stage's lookback (`oldest`, a timestamp of the table's).
NEW = "store_seq > $after"
IN_ORDER = "ORDER BY store_seq LIMIT $limit"


class Follow:
    """A stage's place in a followed table: the `store_seq` of the last row it looked at.

    It starts (and, after a restart, starts again) at the rows within the lookback, so what a
    previous run of the process had not looked at is looked at; stages skip what they had
    already made from it (their results are in the store).
    """

    def __init__(self) -> None:
        self.after: int | None = None  # None: from the lookback

    def params(self, oldest: datetime, limit: int) -> dict[str, Any]:
        """The parameters of a `NEW ... IN_ORDER` query: `$after`, `$oldest`, `$limit`."""
        return {"after": -1 if self.after is None else self.after, "oldest": oldest, "limit": limit}

    def rewind(self, seq: int) -> None:
        """The row numbered `seq` is to be looked at again (what was made of it was lost);
        the rows after it are too, and the stage skips what it has stored of them."""
        if self.after is not None:
            self.after = min(self.after, seq - 1)

    def advance(self, seq: int | None) -> None:
        """Every row numbered up to `seq` has been looked at (None: nothing new)."""
        if seq is not None:
            self.after = seq if self.after is None else max(self.after, seq)
