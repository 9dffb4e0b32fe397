"""The ingest journal: export requests appended to segment files and fsynced before their ack.

A DuckDB commit costs ~10 ms whatever it holds (binding the INSERT, scanning the Arrow batch,
the commit itself) plus ~16 µs a row, so acknowledging each request after its own commit bound
small requests to the commit rate. A request is acknowledged once its bytes are in the journal
instead: appends of concurrent requests share one `fdatasync` (~0.3 ms here), and the writer
loads the rows into DuckDB in larger transactions behind the ack. Each frame has a sequence
number; the writer stores the highest one it has loaded in `journal_state` in the same
transaction as the rows, so a restart replays exactly the frames DuckDB does not hold, and a
segment is deleted once every frame in it is loaded.

The journal keeps the request as it came (its protobuf or OTLP/JSON bytes), not the decoded
rows: an append is then one write of bytes already in memory, and a replay decodes them again
with the same decoder and the attribute limit the frame records.

Frame: a 26-byte header (magic, payload length, sequence, CRC-32 of everything after the CRC,
signal, encoding, attribute limit) and the payload. A crash can leave the last frame torn; it
was never acknowledged (its fsync had not returned), and opening the journal cuts it off.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAGIC = 0x314A5853  # "SXJ1"
HEADER = struct.Struct("<IIQIBBI")  # magic, length, seq, crc, signal, encoding, limit
META = struct.Struct("<QBBI")  # what the CRC covers besides the payload
SUFFIX = ".journal"
SIGNALS = ("traces", "logs")
ENCODINGS = ("protobuf", "json")
IOV_MAX = 1024  # buffers one writev may take (Linux)


@dataclass(frozen=True)
class Frame:
    """One acknowledged export request, as it came."""

    seq: int
    signal: str
    encoding: str
    max_attribute_length: int
    payload: bytes


def encode_header(frame: Frame) -> bytes:
    meta = META.pack(
        frame.seq,
        SIGNALS.index(frame.signal),
        ENCODINGS.index(frame.encoding),
        frame.max_attribute_length,
    )
    crc = zlib.crc32(frame.payload, zlib.crc32(meta))
    return HEADER.pack(
        MAGIC,
        len(frame.payload),
        frame.seq,
        crc,
        SIGNALS.index(frame.signal),
        ENCODINGS.index(frame.encoding),
        frame.max_attribute_length,
    )


def read_frames(path: Path) -> tuple[list[Frame], int, str]:
    """The whole frames of one segment, the offset where they end, and why reading stopped
    early there ('' at the end of the file)."""
    frames: list[Frame] = []
    data = path.read_bytes()
    offset = 0
    while offset < len(data):
        if len(data) - offset < HEADER.size:
            return frames, offset, "a torn header"
        magic, length, seq, crc, signal, encoding, limit = HEADER.unpack_from(data, offset)
        if magic != MAGIC or signal >= len(SIGNALS) or encoding >= len(ENCODINGS):
            return frames, offset, "not a frame header"
        start = offset + HEADER.size
        payload = data[start : start + length]
        if len(payload) < length:
            return frames, offset, "a torn frame"
        if zlib.crc32(payload, zlib.crc32(META.pack(seq, signal, encoding, limit))) != crc:
            return frames, offset, "a frame whose checksum does not match"
        frames.append(Frame(seq, SIGNALS[signal], ENCODINGS[encoding], limit, payload))
        offset = start + length
    return frames, offset, ""


def write_all(fd: int, buffers: list[bytes]) -> int:
    """Writes every buffer, in as few system calls as the kernel allows; a short write (a disk
    filling up) goes on with the rest, so it fails with the kernel's own error (ENOSPC)."""
    written = 0
    for start in range(0, len(buffers), IOV_MAX):
        chunk = buffers[start : start + IOV_MAX]
        done = os.writev(fd, chunk)
        written += done
        if done < sum(map(len, chunk)):
            rest = memoryview(b"".join(chunk))[done:]
            while rest:
                n = os.write(fd, rest)
                rest, written = rest[n:], written + n
    return written


class Journal:
    """The segment files of one data directory. `append` runs on one thread (the writer's
    journal thread); `release` on another (the DuckDB writer), hence the lock."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._segments: list[tuple[int, Path]] = []  # (first seq, path), oldest first
        self._fd = -1
        self._size = 0
        self.next_seq = 1
        self.bytes = 0  # in the segments not yet released

    def open(self, applied: int) -> Iterator[Frame]:
        """Opens the journal and yields the frames after `applied` (the last sequence DuckDB
        holds) in order, for the caller to load again; new appends go to a new segment."""
        self.directory.mkdir(parents=True, exist_ok=True)
        paths = sorted(self.directory.glob(f"*{SUFFIX}"))
        last = applied
        for index, path in enumerate(paths):
            frames, end, stopped = read_frames(path)
            if stopped:
                self._cut(path, end, stopped, final=index == len(paths) - 1)
            if frames:
                last = max(last, frames[-1].seq)
                self._segments.append((frames[0].seq, path))
                self.bytes += end
            else:
                path.unlink()
            yield from (f for f in frames if f.seq > applied)
        self.next_seq = last + 1
        self._start_segment()
        self.release(applied)

    def _cut(self, path: Path, end: int, why: str, final: bool) -> None:
        if final:  # the tail of the last append, never acknowledged
            log.warning("journal %s ends in %s at byte %d; cut there", path.name, why, end)
            os.truncate(path, end)
        else:
            log.error(
                "journal %s holds %s at byte %d; the rest of that segment is skipped",
                path.name,
                why,
                end,
            )

    def _start_segment(self) -> None:
        path = self.directory / f"{self.next_seq:020d}{SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd, self._size = fd, 0
            self._segments.append((self.next_seq, path))
        self._sync_directory()

    def _sync_directory(self) -> None:
        """A new or removed segment's name survives a crash only once its directory is synced."""
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def append(self, requests: list[tuple[str, str, int, bytes]]) -> list[int]:
        """Appends (signal, encoding, attribute limit, payload) requests and fsyncs once;
        returns their sequence numbers. On an error nothing of them stays in the journal."""
        if self._size >= self.segment_bytes:
            self._start_segment()
        frames = [Frame(self.next_seq + i, *request) for i, request in enumerate(requests)]
        buffers: list[bytes] = []
        for frame in frames:
            buffers += (encode_header(frame), frame.payload)
        try:
            written = write_all(self._fd, buffers)
            os.fdatasync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self._size)  # no frame of a refused request stays behind
            raise
        self._size += written
        self.bytes += written
        self.next_seq += len(frames)
        return [f.seq for f in frames]

    def has_room(self, needed: int) -> bool:
        """Whether the journal's file system has `needed` bytes free (after a failed append)."""
        stat = os.statvfs(self.directory)
        return stat.f_bavail * stat.f_frsize >= needed

    def release(self, applied: int) -> None:
        """Deletes the segments whose every frame DuckDB holds (all but the one being written).
        One that cannot be deleted costs space, and its frames are skipped by a replay."""
        removed = False
        with self._lock:
            while len(self._segments) > 1 and self._segments[1][0] - 1 <= applied:
                _, path = self._segments.pop(0)
                try:
                    self.bytes -= path.stat().st_size
                    path.unlink()
                except OSError as exc:
                    log.warning("could not remove the loaded journal segment %s: %s", path, exc)
                removed = True
        if removed:
            self._sync_directory()

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
