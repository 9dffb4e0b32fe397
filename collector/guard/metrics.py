"""The guard's self-metrics: calls, answers, calls it could not judge in time, latency."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from collector.guard.call import GuardAnswer
from collector.guard.check import PARTIAL, UNKNOWN
from collector.guard.session_rules import SESSION_UNKNOWN

# Guard calls are answered in milliseconds: finer buckets than the receivers'.
GUARD_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1)


class GuardMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "sextant_guard_calls",
            "Guard calls received, by protocol (http, grpc).",
            ["protocol"],
            registry=registry,
        )
        self.answers = Counter(
            "sextant_guard_answers",
            "Guard answers given, by answer (allow, review, deny) and how it was reached:"
            " judged, unknown (the run unknown or partial), unavailable (guard.on_unavailable).",
            ["answer", "basis"],
            registry=registry,
        )
        self.timeouts = Counter(
            "sextant_guard_timeouts",
            "Guard calls answered with guard.on_unavailable, by reason: deadline (not judged"
            " within guard.deadline_seconds), overloaded (guard.max_pending calls waiting),"
            " error (the judgement raised).",
            ["reason"],
            registry=registry,
        )
        self.duration = Histogram(
            "sextant_guard_duration_seconds",
            "Time from a guard call's arrival to its answer.",
            buckets=GUARD_BUCKETS,
            registry=registry,
        )
        self.dropped = Counter(
            "sextant_guard_steps_dropped",
            "Guard steps not stored, by reason: queue_full (guard.max_unrecorded waiting),"
            " refused (ingest refused the batch).",
            ["reason"],
            registry=registry,
        )
        self.runs = Counter(
            "sextant_guard_runs",
            "How each judgement had its run so far: grown (the run kept from the previous call"
            " about it, with the spans since), built (built whole from the spans held in"
            " memory), read (read from the store in a guard thread: closed, recovered, spilled"
            " or still loading), native (weighed in native code on the run kept natively, on"
            " the event loop), listener (the same, in a native listener's threads). Many built"
            " or read calls cost the event loop or the deadline.",
            ["how"],
            registry=registry,
        )
        self.kept_ahead = Counter(
            "sextant_guard_runs_kept_ahead",
            "Runs kept natively before any call about them (their service asks the guard).",
            registry=registry,
        )
        self._labelled()

    def _labelled(self) -> None:
        """Each call counts twice: the labelled counters are looked up once, not on every
        call; the timeouts are shown at 0 before any."""
        self._runs = {
            how: self.runs.labels(how) for how in ("grown", "built", "read", "native", "listener")
        }
        self._calls: dict[str, Counter] = {}
        self._answers = {
            (answer, basis): self.answers.labels(answer, basis)
            for answer in ("allow", "review", "deny")
            for basis in ("judged", "unknown", "unavailable")
        }
        for reason in ("deadline", "overloaded", "error"):
            self.timeouts.labels(reason)

    def called(self, protocol: str) -> None:
        counter = self._calls.get(protocol)
        if counter is None:
            counter = self._calls[protocol] = self.calls.labels(protocol)
        counter.inc()

    def had_run(self, how: str) -> None:
        self._runs[how].inc()

    def gave(self, answer: GuardAnswer, basis: str) -> None:
        """Count an answer reached on `basis`; a judged run that was unknown or partial
        counts as unknown."""
        if basis == "judged" and {UNKNOWN, PARTIAL, SESSION_UNKNOWN} & set(answer.reasons):
            basis = "unknown"
        self.answered(answer.answer.value, basis)

    def answered(self, answer: str, basis: str) -> None:
        counter = self._answers.get((answer, basis))
        if counter is None:
            counter = self._answers[answer, basis] = self.answers.labels(answer, basis)
        counter.inc()
