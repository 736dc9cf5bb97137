"""Container log files with a per-line timestamp index, and the reads ``kubectl logs`` needs.

A container's stdout and stderr go into one pipe that the agent drains (``LogPipe``): the bytes
are appended unchanged to ``{name}.log`` (so the file is exactly the container's output, as
before), and for every line that starts, a 16-byte record ``(byte offset, unix nanoseconds)`` is
appended to ``{name}.log.idx`` *before* the bytes themselves, so a reader never sees a line
without its timestamp. Restarts rotate both files together to ``{name}.{n}.log[.idx]``.

Invariants and failure modes:
- The agent is the only reader of the pipe; when it dies the container dies with it (PDEATHSIG
  chain), so at most the bytes in flight in the pipe are lost. The pipe buffer is raised to
  1 MiB so that a briefly busy agent does not stall a chatty container.
- Output written while the agent is blocked waits in the pipe (back-pressure), as with any
  container runtime's log shim.
- A line whose index record is missing (a log written by an older agent, or a truncated index)
  gets the file's modification time; timestamps are never invented out of order.
- Everything is treated as stdout: stdout and stderr share the pipe so that their relative order
  is kept, as in the plain log file.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import datetime as dt
import fcntl
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

_RECORD = struct.Struct("!QQ")
F_SETPIPE_SZ = 1031
PIPE_SIZE = 1 << 20


def index_path(log: Path) -> Path:
    return log.with_name(log.name + ".idx")


def rotate(log: Path, target: Path) -> None:
    """Moves a log and its index to ``target`` (``{name}.{n}.log``)."""
    os.replace(log, target)
    with contextlib.suppress(FileNotFoundError):
        os.replace(index_path(log), index_path(target))


class LogPipe:
    """The pipe a container writes into and the task that files its output with timestamps."""

    def __init__(self, path: Path) -> None:
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self._log = os.open(path, flags, 0o644)
        self._idx = os.open(index_path(path), flags, 0o644)
        self._offset = os.fstat(self._log).st_size
        self._at_line_start = True
        self._read, self.write_fd = os.pipe2(os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.write_fd, F_SETPIPE_SZ, PIPE_SIZE)

    def close_write_end(self) -> None:
        """After the container's launcher got its copy: EOF now means every writer is gone."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def abort(self) -> None:
        self.close_write_end()
        for fd in (self._read, self._log, self._idx):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._read = self._log = self._idx = -1

    def _file(self, data: bytes, now_ns: int) -> None:
        records = []
        start = 0
        if self._at_line_start:
            records.append(_RECORD.pack(self._offset, now_ns))
        while (nl := data.find(b"\n", start)) != -1:
            start = nl + 1
            if start < len(data):
                records.append(_RECORD.pack(self._offset + start, now_ns))
        self._at_line_start = data.endswith(b"\n")
        if records:
            os.write(self._idx, b"".join(records))
        os.write(self._log, data)
        self._offset += len(data)

    async def run(self) -> None:
        """Drains the pipe until every writer closed it; then closes the files."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=PIPE_SIZE)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self._read, "rb", buffering=0)
        )
        self._read = -1  # owned by the transport now
        try:
            while data := await reader.read(PIPE_SIZE):
                self._file(data, time.time_ns())
        finally:
            transport.close()
            self.abort()


# ---------------------------------------------------------------------- reading
@dataclass
class LogLine:
    time_ns: int
    data: bytes  # including its newline, if it had one


def format_time(time_ns: int) -> str:
    """RFC 3339 with nanoseconds, UTC (what kubelet prefixes with ``timestamps=true``)."""
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{nanos:09d}Z"


def parse_time(text: str) -> int:
    """RFC 3339 (as the apiserver sends ``sinceTime``) to unix nanoseconds."""
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1_000_000_000)


def _index(log: Path) -> tuple[list[int], list[int]]:
    offsets: list[int] = []
    times: list[int] = []
    try:
        raw = index_path(log).read_bytes()
    except FileNotFoundError:
        return offsets, times
    for i in range(len(raw) // _RECORD.size):
        off, ts = _RECORD.unpack_from(raw, i * _RECORD.size)
        offsets.append(off)
        times.append(ts)
    return offsets, times


@dataclass
class LogChunk:
    """One consistent read of a log file: complete lines, where they end, and the unterminated
    rest (a line being written, or the last one of an instance that did not end it)."""

    lines: list[LogLine]
    end: int
    partial: LogLine | None


def read_lines(log: Path, start: int = 0) -> LogChunk:
    """The lines of ``log`` from byte ``start`` on, with their timestamps."""
    try:
        with open(log, "rb") as fh:
            fh.seek(start)
            data = fh.read()
            mtime = os.fstat(fh.fileno()).st_mtime_ns
    except FileNotFoundError:
        return LogChunk([], start, None)
    offsets, times = _index(log)

    def stamp(off: int, floor: int) -> int:
        i = bisect.bisect_right(offsets, off) - 1
        return times[i] if i >= 0 and offsets[i] == off else max(floor, mtime)

    lines: list[LogLine] = []
    pos = 0
    last_ts = 0
    while (nl := data.find(b"\n", pos)) != -1:
        last_ts = stamp(start + pos, last_ts)
        lines.append(LogLine(last_ts, data[pos : nl + 1]))
        pos = nl + 1
    partial = None
    if pos < len(data):
        partial = LogLine(stamp(start + pos, last_ts), data[pos:])
    return LogChunk(lines, start + pos, partial)


@dataclass
class LogQuery:
    """The ``containerLogs`` options that select lines (kubelet: ``PodLogOptions``)."""

    tail_lines: int | None = None
    since_ns: int | None = None
    timestamps: bool = False
    limit_bytes: int | None = None

    def select(self, lines: list[LogLine]) -> list[LogLine]:
        if self.since_ns is not None:
            lines = [line for line in lines if line.time_ns >= self.since_ns]
        if self.tail_lines is not None:
            lines = lines[-self.tail_lines :] if self.tail_lines > 0 else []
        return lines

    def render(self, line: LogLine) -> bytes:
        if self.timestamps:
            return format_time(line.time_ns).encode() + b" " + line.data
        return line.data
