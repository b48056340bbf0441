"""`gpulab serve`: the app in a browser through textual-serve, on 127.0.0.1 by default."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


@contextlib.contextmanager
def served(tmp_path, *args: str, limit_s: int = 120):
    """`gpulab serve ARGS` in its own process group; yields (process, URL, what it printed).

    Bounded twice: coreutils `timeout` stops the server by itself after
    limit_s even if this test process dies, and the finally kills the group."""
    proc = subprocess.Popen(
        [
            "timeout",
            "-s",
            "INT",
            "-k",
            "10",
            str(limit_s),
            sys.executable,
            "-m",
            "gpulab",
            "serve",
            *args,
        ],
        env=gpulab_env(tmp_path / "workspace"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        seen = ""
        deadline = time.monotonic() + 60
        fd = proc.stdout.fileno()  # raw reads: a buffered readline could sit on the next line
        whole_url = re.compile(r"(http://\S+\?token=[\w-]+)\s")  # not cut mid-token
        while not whole_url.search(seen) and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                seen += chunk.decode("utf-8", "replace")
        match = whole_url.search(seen)
        assert match, seen
        yield proc, match.group(1), seen
    finally:
        for sig in (signal.SIGINT, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass


def lab_base(url: str) -> str:
    """The lab's address without the token and the trailing slash:
    http://127.0.0.1:PORT/<its secret path>."""
    return url.split("?", 1)[0].rstrip("/")


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


async def read_screen(ws, until: bytes, limit: int = 200_000, quiet_s: float = 10.0) -> bytes:
    import aiohttp  # textual-serve's own dependency

    got = b""
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


async def handshake_status(session, url: str, **kw) -> int:
    """The HTTP status a websocket upgrade gets (101 when it is accepted)."""
    import aiohttp

    try:
        async with session.ws_connect(url, **kw):
            return 101
    except aiohttp.WSServerHandshakeError as exc:
        return exc.status


def test_serve_lets_in_only_who_holds_the_token(tmp_path):
    """Real HTTP and websocket requests against a real server on 127.0.0.1."""
    import aiohttp

    port = free_port()
    with served(tmp_path, "--port", str(port)) as (_, url, _printed):
        # A path of 12 characters (9 random bytes) and a token of 32 (24):
        # the address fits an 80-column terminal (issue 48).
        assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/[\w-]{{12,}}/\?token=[\w-]{{32,}}", url)
        token = url.split("token=")[1]
        base = lab_base(url)
        root = f"http://127.0.0.1:{port}"
        wait_for_port(port)

        async def probe() -> None:
            # No cookie jar: a stranger, another user of this machine.
            async with aiohttp.ClientSession() as s:
                for path in (
                    "/",
                    "/?token=wrong",
                    "/?token=%C3%A9",
                    "/static/js/textual.js",
                    "/download/x",
                ):
                    async with s.get(base + path, allow_redirects=False) as r:
                        assert r.status == 403, path
                        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
                assert await handshake_status(s, f"{base}/ws?width=80&height=24") == 403
                # Outside the lab's path, even with the token: nothing.
                for path in ("/", f"/?token={token}", "/ws", "/static/js/textual.js"):
                    async with s.get(root + path, allow_redirects=False) as r:
                        assert r.status == 403, path
                assert await handshake_status(s, f"{base}/ws?token=wrong") == 403
                # DNS rebinding: the right token through a foreign name is refused.
                async with s.get(
                    f"{base}/?token={token}",
                    headers={"Host": f"evil.test:{port}"},
                    allow_redirects=False,
                ) as r:
                    assert r.status == 403
                # Non-browser clients may send the token as a header.
                async with s.get(base + "/", headers={"Authorization": f"token {token}"}) as r:
                    assert r.status == 200 and "gpulab" in await r.text()
            # A browser: the token is traded for a cookie and leaves the URL.
            jar = aiohttp.CookieJar(unsafe=True)  # unsafe: cookies for an IP address
            async with aiohttp.ClientSession(cookie_jar=jar) as s:
                async with s.get(f"{base}/?token={token}&fontsize=14", allow_redirects=False) as r:
                    prefix = base.removeprefix(root)
                    assert r.status == 302 and r.headers["Location"] == f"{prefix}/?fontsize=14"
                    cookie = r.headers["Set-Cookie"]
                    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
                    # Sent below the lab's path only: never to another port's server.
                    assert f"Path={prefix}/" in cookie
                    assert token not in cookie
                async with s.get(base + "/?fontsize=14") as r:
                    page = await r.text()
                    assert r.status == 200 and f"{base.replace('http', 'ws', 1)}/ws" in page
                async with s.get(base + "/static/js/textual.js") as r:
                    assert r.status == 200
                # With the cookie, a page from another origin still cannot drive the lab.
                for origin in ("http://evil.test", f"http://localhost:{port + 1}", "null"):
                    status = await handshake_status(s, f"{base}/ws", origin=origin)
                    assert status == 403, origin

        asyncio.run(asyncio.wait_for(probe(), 60))


def test_serve_answers_a_browser(tmp_path):
    import aiohttp

    port = free_port()
    with served(tmp_path, "--port", str(port)) as (_, url, _printed):
        wait_for_port(port)

        async def browse() -> bytes:
            jar = aiohttp.CookieJar(unsafe=True)
            async with aiohttp.ClientSession(cookie_jar=jar) as s:
                async with s.get(url) as r:  # follows the redirect, keeps the cookie
                    assert r.status == 200 and "gpulab" in await r.text()
                # The page's websocket starts one `python -m gpulab` and streams
                # its screen. At 80 columns the lesson list steps aside and all
                # seven tabs show.
                async with s.ws_connect(
                    f"{lab_base(url)}/ws?width=80&height=24",
                    origin=f"http://127.0.0.1:{port}",
                ) as ws:
                    return await read_screen(ws, until=b"Serving")

        screen = asyncio.run(asyncio.wait_for(browse(), 90))
        assert b"Lesson" in screen and b"Serving" in screen


# Where a page or a style sheet makes the browser fetch something.
FETCHES = re.compile(
    r"""(?:\b(?:href|src)\s*=\s*["']([^"']+)["'])|(?:url\(\s*["']?([^"')]+))|"""
    r"""(?:@import\s+["']([^"']+))""",
    re.IGNORECASE,
)


def test_serve_page_asks_no_other_host(tmp_path):
    """Everything the page loads (its style sheets' fonts and images too) comes
    from the lab's own server: nothing from fonts.googleapis.com or any CDN."""
    import aiohttp

    port = free_port()
    with served(tmp_path, "--port", str(port)) as (_, url, _printed):
        wait_for_port(port)
        base = f"http://127.0.0.1:{port}"

        async def fetch_all() -> dict[str, str]:
            jar = aiohttp.CookieJar(unsafe=True)
            async with aiohttp.ClientSession(cookie_jar=jar) as s:
                async with s.get(url) as r:
                    page = await r.text()
                texts = {"/": page}
                for css in re.findall(r'href="([^"]+\.css)"', page):
                    async with s.get(css) as r:
                        assert r.status == 200, css
                        texts[css] = await r.text()
                for text in list(texts.values()):
                    for m in FETCHES.finditer(text):
                        ref = next(g for g in m.groups() if g)
                        if ref.startswith(base) and "/fonts/" in ref:
                            async with s.get(ref) as r:
                                assert r.status == 200, ref  # the font is really there
                return texts

        texts = asyncio.run(asyncio.wait_for(fetch_all(), 60))
    assert len(texts) >= 2  # the page and xterm.css
    for where, text in texts.items():
        for m in FETCHES.finditer(text):
            ref = next(g for g in m.groups() if g)
            if ref.startswith(("http://", "https://", "//")):
                assert ref.startswith(base + "/"), f"{where} loads {ref}"
        assert "googleapis" not in text, where


def test_serve_on_a_unix_socket_only_its_owner_can_open(tmp_path):
    import aiohttp

    short = Path(tempfile.mkdtemp(prefix="gl-"))  # AF_UNIX paths are short (~107 bytes)
    sock = short / "lab.sock"
    try:
        with served(tmp_path, "--unix", str(sock)) as (proc, url, printed):
            assert "ssh -L 8000:" in printed and url.startswith("http://localhost:8000/")
            deadline = time.monotonic() + 30
            while not sock.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert stat.S_ISSOCK(sock.lstat().st_mode)
            assert stat.S_IMODE(sock.lstat().st_mode) == 0o600

            async def probe() -> tuple[int, int]:
                conn = aiohttp.UnixConnector(path=str(sock))
                async with aiohttp.ClientSession(connector=conn) as s:
                    async with s.get("http://localhost:8000/", allow_redirects=False) as r:
                        stranger = r.status
                    async with s.get(url, allow_redirects=False) as r:
                        owner = r.status
                return stranger, owner

            assert asyncio.run(asyncio.wait_for(probe(), 30)) == (403, 302)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=20)
        assert not sock.exists()  # cleaned up on the way out
    finally:
        shutil.rmtree(short, ignore_errors=True)


def test_serve_refuses_what_it_should_not_do(run_gpulab, tmp_path):
    r = run_gpulab("serve", "--host", "0.0.0.0", timeout=30)
    assert r.returncode == 2 and "--allow-remote" in r.stderr
    r = run_gpulab("serve", "--unix", str(tmp_path / "s.sock"), "--port", "9000", timeout=30)
    assert r.returncode == 2 and "--unix" in r.stderr
    not_a_socket = tmp_path / "notes.txt"
    not_a_socket.write_text("mine")
    r = run_gpulab("serve", "--unix", str(not_a_socket), timeout=30)
    assert r.returncode == 2 and "not a socket" in r.stderr
    assert not_a_socket.read_text() == "mine"


def test_serve_warns_when_allowed_beyond_this_machine(tmp_path):
    port = free_port()
    with served(tmp_path, "--host", "0.0.0.0", "--allow-remote", "--port", str(port)) as (
        _,
        url,
        printed,
    ):
        wait_for_port(port)
        assert "warning: serving on 0.0.0.0" in printed
        assert "token=" in url  # the token holds there too


def test_serve_prints_its_address_on_stdout_and_its_words_on_stderr(tmp_path):
    """The URL is the command's output (a script reads it); it was on stderr only."""
    proc = subprocess.Popen(
        ["timeout", "-s", "INT", "60", sys.executable, "-m", "gpulab", "serve"]
        + ["--port", str(free_port())],
        env=gpulab_env(tmp_path / "workspace"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        ready = select.select([proc.stdout], [], [], 60)[0]
        line = proc.stdout.readline() if ready else ""
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[\w-]+/\?token=[\w-]+\n", line), line
    assert "open this address in a browser" in err and "token=" not in err


def test_serve_rejects_a_bad_port(run_gpulab):
    out = run_gpulab("serve", "--port", "70000")
    assert out.returncode == 2 and "--port" in out.stderr


def lab_pids(root: int) -> set[int]:
    """Every `python -m gpulab` (a lab, not the server) below the process `root`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            todo.append(pid)
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[1:] == [b"-m", b"gpulab", b""]:
                found.add(pid)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone_within(pids: set[int], seconds: float) -> set[int]:
    """Those of `pids` still alive after `seconds`."""
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {p for p in pids if alive(p)}


async def open_lab(s, url: str, port: int) -> tuple[object, bytes]:
    """A websocket to a lab that has drawn its first screen."""
    ws = await s.ws_connect(
        f"{lab_base(url)}/ws?width=80&height=24", origin=f"http://127.0.0.1:{port}"
    )
    return ws, await read_screen(ws, until=b"Serving")


async def close_a_tab_then_stop(url: str, port: int, serve_pid: int, stop: int) -> set[int]:
    """Open a tab, close it (its lab must end), open another, signal the
    server; returns the labs still running 5 s after the signal."""
    import aiohttp

    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as s:
        async with s.get(url) as r:
            assert r.status == 200
        first, screen = await open_lab(s, url, port)
        assert b"Serving" in screen
        tab = lab_pids(serve_pid)
        await first.close()
        left = await asyncio.to_thread(gone_within, tab, 5)
        assert tab and not left, f"the closed tab's lab {left} still runs"
        second, screen = await open_lab(s, url, port)
        assert b"Serving" in screen
        labs = lab_pids(serve_pid)
        assert labs
        os.kill(serve_pid, stop)
        left = await asyncio.to_thread(gone_within, labs, 5)
        with contextlib.suppress(Exception):
            await second.close()
        return left


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_serve_stops_the_lab_when_the_tab_or_the_server_goes(tmp_path, stop):
    """A closed tab ends its lab; a server stopped by SIGTERM ends the rest, and
    one killed outright leaves no lab running (each sees its input end)."""
    port = free_port()
    with served(tmp_path, "--port", str(port)) as (proc, url, _printed):
        wait_for_port(port)
        # proc is coreutils' timeout; the server is its one child.
        serve_pid = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text())
        left = asyncio.run(asyncio.wait_for(close_a_tab_then_stop(url, port, serve_pid, stop), 120))
        assert not left, f"after {signal.Signals(stop).name} of the server, the lab {left} runs"
        if stop == signal.SIGTERM:
            deadline = time.monotonic() + 5
            while alive(serve_pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive(serve_pid), "the server did not stop within 5 s of SIGTERM"
