"""`gpulab serve`: the app in a browser through textual-serve, on 127.0.0.1 by default."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import gpulab_env

pytest.importorskip("textual_serve")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_defaults_to_this_machine_only():
    from gpulab.cli import build_parser

    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)


async def read_screen(url: str, until: bytes, limit: int = 200_000,
                      quiet_s: float = 10.0) -> bytes:
    import aiohttp  # textual-serve's own dependency

    got = b""
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        while len(got) < limit and until not in got:
            try:
                msg = await asyncio.wait_for(ws.receive(), quiet_s)
            except asyncio.TimeoutError:
                break
            if msg.type == aiohttp.WSMsgType.TEXT:
                got += msg.data.encode()
            elif msg.type == aiohttp.WSMsgType.BINARY:
                got += msg.data
            else:
                break
    return got


def test_serve_answers_a_browser(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gpulab", "serve", "--port", str(port)],
                            env=gpulab_env(tmp_path / "workspace"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        page = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
                    page = r.read().decode("utf-8", "replace")
                break
            except OSError:
                time.sleep(0.3)
        assert page is not None, proc.stdout.read() if proc.poll() is not None else "no answer"
        assert "gpulab" in page
        # The page's websocket starts one `python -m gpulab` and streams its screen.
        # At 80 columns the lesson list steps aside and all seven tabs show.
        screen = asyncio.run(read_screen(f"http://127.0.0.1:{port}/ws?width=80&height=24",
                                         until=b"Serving"))
        assert b"Lesson" in screen and b"Serving" in screen
    finally:
        # The server leads its own process group, with the app it started for us.
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def test_serve_rejects_a_bad_port(run_gpulab):
    out = run_gpulab("serve", "--port", "70000")
    assert out.returncode == 2 and "--port" in out.stderr
