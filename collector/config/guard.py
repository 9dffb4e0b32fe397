"""The runtime guard's section of the configuration."""

from __future__ import annotations

from pydantic import Field

from collector.config.sections import Seconds, Strict


class GuardConfig(Strict):
    """The runtime guard (`POST /v1/guard` and the gRPC GuardService beside OTLP)."""

    enabled: bool = Field(True, description="Answer guard calls on the OTLP listeners.")
    deadline_seconds: Seconds = Field(
        0.25,
        gt=0,
        description="Longest a guard call is judged; past it the call gets the packs'"
        " guard.on_unavailable answer.",
    )
    native: bool = Field(
        True,
        description="Weigh a call in native code (the native builder and rule interpreter) when"
        " the packs' guard rules are all native and the run has been kept since an earlier"
        " call; otherwise, and with false, in Python.",
    )
    listener_ahead: int = Field(
        10,
        ge=0,
        le=19,
        description="Nice steps by which the collector's other threads run behind the native"
        " listeners', which answer guard calls about runs kept natively, and the event"
        " loop's (Linux; 0: all alike). Storage, assembly and evaluation then wait for a core"
        " instead of the agent.",
    )
    threads: int = Field(
        2, ge=1, le=64, description="Threads that judge guard calls beside the event loop."
    )
    max_pending: int = Field(
        512,
        ge=1,
        description="Guard calls waiting for a thread at most; more are answered at once with"
        " guard.on_unavailable (counted as overloaded).",
    )
    record_linger_seconds: Seconds = Field(
        0.05,
        gt=0,
        description="How long the guard's steps gather before they are stored as one batch of"
        " spans through ingest.",
    )
    max_unrecorded: int = Field(
        10_000,
        ge=1,
        description="Guard steps waiting to be stored at most; more are dropped and counted.",
    )
