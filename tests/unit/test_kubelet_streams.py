"""Stream protocols (``nodeagent.streams``) and timestamped container logs (``containerlog``)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from kuberay.devenv.nodeagent import containerlog, streams
from kuberay.devenv.nodeagent.containerlog import LogLine, LogPipe, LogQuery
from kuberay.devenv.nodeagent.spdy import (
    DataFrame,
    FrameCodec,
    Session,
    Stream,
    SynReplyFrame,
    SynStreamFrame,
)


def test_negotiation_takes_the_clients_first_supported_protocol() -> None:
    offered = ["v5.channel.k8s.io", "v4.channel.k8s.io, v3.channel.k8s.io"]
    assert streams.negotiate(offered, streams.REMOTECOMMAND_PROTOCOLS) == "v4.channel.k8s.io"
    assert streams.negotiate(["channel.k8s.io"], streams.REMOTECOMMAND_PROTOCOLS) is None
    assert streams.negotiate(["portforward.k8s.io"], ("portforward.k8s.io",))


def test_command_options_follow_the_apiservers_query() -> None:
    opts = streams.CommandOptions.from_query(
        {"input": "1", "output": "1", "error": "1", "tty": "1"}
    )
    assert (opts.stdin, opts.stdout, opts.stderr, opts.tty) == (True, True, False, True)
    with pytest.raises(ValueError, match="at least 1"):
        streams.CommandOptions.from_query({"tty": "1"})


def test_exit_status_is_what_client_go_decodes() -> None:
    status = streams.exit_status(300)
    assert status["status"] == "Failure"
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "255"}]
    assert streams.success_status()["status"] == "Success"


async def test_resize_events_are_decoded_across_chunks() -> None:
    a, b = socket.socketpair()
    (sr, sw), (cr, cw) = (
        await asyncio.open_connection(sock=a),
        await asyncio.open_connection(sock=b),
    )
    got: list[tuple[int, int]] = []
    done = asyncio.Event()
    readers: list[asyncio.Task[None]] = []

    def on_stream(stream: Stream) -> None:
        async def run() -> None:
            await streams.resize_events(stream, lambda w, h: got.append((w, h)))
            done.set()

        readers.append(asyncio.ensure_future(run()))

    server = Session(sr, sw, on_stream=on_stream)
    serving = asyncio.create_task(server.serve())
    codec = FrameCodec()
    cw.write(codec.encode(SynStreamFrame(1, {"streamtype": ["resize"]})))
    for chunk in (b'{"Width":80,', b'"Height":24}\n{"Width"', b':100,"Height":40}', b""):
        cw.write(codec.encode(DataFrame(1, chunk, 1 if not chunk else 0)))
    await cw.drain()
    frames = FrameCodec().feed(await cr.read(4096))
    assert isinstance(frames[0], SynReplyFrame)
    await asyncio.wait_for(done.wait(), 5)
    assert got == [(80, 24), (100, 40)]
    serving.cancel()
    await server.close()
    cw.close()


# ---------------------------------------------------------------------- container logs
async def test_log_pipe_files_output_with_one_timestamp_per_line(tmp_path: Path) -> None:
    log = tmp_path / "main.log"
    pipe = LogPipe(log)
    fd = os.dup(pipe.write_fd)
    pipe.close_write_end()
    task = asyncio.create_task(pipe.run())
    os.write(fd, b"one\n")
    await asyncio.sleep(0.05)
    os.write(fd, b"tw")
    await asyncio.sleep(0.05)
    os.write(fd, b"o\nthree\nunterminated")
    os.close(fd)
    await asyncio.wait_for(task, 5)
    assert log.read_bytes() == b"one\ntwo\nthree\nunterminated"
    chunk = containerlog.read_lines(log)
    lines = chunk.lines
    assert [line.data for line in lines] == [b"one\n", b"two\n", b"three\n"]
    # A line's time is when its first byte arrived.
    assert lines[0].time_ns < lines[1].time_ns < lines[2].time_ns
    assert chunk.partial is not None
    assert chunk.partial.data == b"unterminated"
    assert chunk.end == len(b"one\ntwo\nthree\n")


async def test_rotation_moves_the_index_with_the_log(tmp_path: Path) -> None:
    log = tmp_path / "main.log"
    pipe = LogPipe(log)
    os.write(pipe.write_fd, b"first run\n")
    pipe.close_write_end()
    await asyncio.wait_for(pipe.run(), 5)
    containerlog.rotate(log, tmp_path / "main.0.log")
    assert not log.exists()
    assert containerlog.index_path(tmp_path / "main.0.log").exists()
    lines = containerlog.read_lines(tmp_path / "main.0.log").lines
    assert [line.data for line in lines] == [b"first run\n"]


def test_lines_without_index_get_the_file_time(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_bytes(b"a\nb\n")
    chunk = containerlog.read_lines(log)
    lines = chunk.lines
    assert chunk.end == 4
    assert lines[0].time_ns == lines[1].time_ns == log.stat().st_mtime_ns


def test_query_selects_since_then_tail_and_renders_timestamps() -> None:
    lines = [LogLine(i * 1_000_000_000, f"l{i}\n".encode()) for i in range(10)]
    assert [x.data for x in LogQuery(tail_lines=2).select(lines)] == [b"l8\n", b"l9\n"]
    assert LogQuery(tail_lines=0).select(lines) == []
    assert len(LogQuery(since_ns=7_000_000_000).select(lines)) == 3
    q = LogQuery(timestamps=True)
    assert q.render(LogLine(1_700_000_000_123_456_789, b"x\n")) == (
        b"2023-11-14T22:13:20.123456789Z x\n"
    )
    assert containerlog.parse_time("2023-11-14T22:13:20Z") == 1_700_000_000 * 10**9
