"""`gpulab serve` in a real browser: headless Chromium (Debian's `chromium`
package), driven over the Chrome DevTools Protocol with aiohttp.

One test, a learner's visit (issue 30): the page draws the lab (the lab's
screen arrives over the page's own websocket and the terminal is on the
page); keys pressed without a click first reach it (Enter, 2, e, typing: the
edit lands on disk), c checks, q ends the lab and the page says so, its
Restart opens a new one; closing the tab ends the lab's process within 5 s;
and nothing the page loads comes from another host (every request the page
makes is logged by the DevTools Network domain).

Skipped where no Chromium is installed; .ci/run installs it with apt where it
can (about 40 s and 120 MB of packages on Debian 12, measured here).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("textual_serve")

from test_tui_serve import free_port, gone_within, lab_pids, served, wait_for_port  # noqa: E402

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (apt-get install chromium)"),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc"),
    pytest.mark.slow,
]


@contextlib.contextmanager
def chromium(profile: Path):
    """Headless Chromium with DevTools on a port of its own choosing; yields the port."""
    proc = subprocess.Popen(
        [
            str(CHROMIUM),
            "--headless=new",
            "--no-sandbox",  # root in CI; the page is ours
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            # The browser's own traffic (updates, safe browsing) is not the
            # page's, but none is wanted on an offline box either.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--window-size=1024,700",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (active.exists() and active.read_text().strip()):
            assert proc.poll() is None, "Chromium exited at start"
            assert time.monotonic() < deadline, "Chromium never opened DevTools"
            time.sleep(0.1)
        yield int(active.read_text().split()[0])
    finally:
        with contextlib.suppress(ProcessLookupError):
            import os

            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


class Page:
    """One tab, spoken to in DevTools Protocol messages; events are kept."""

    def __init__(self, ws) -> None:
        self.ws, self.ids, self.events = ws, itertools.count(1), []
        self.replies: dict[int, dict] = {}

    async def call(self, method: str, **params) -> dict:
        n = next(self.ids)
        await self.ws.send_str(json.dumps({"id": n, "method": method, "params": params}))
        while n not in self.replies:
            await self.pump(30)
        reply = self.replies.pop(n)
        assert "error" not in reply, (method, reply)
        return reply.get("result", {})

    async def pump(self, timeout: float) -> None:
        msg = json.loads(await asyncio.wait_for(self.ws.receive_str(), timeout))
        if "id" in msg:
            self.replies[msg["id"]] = msg
        else:
            self.events.append(msg)

    async def until(self, done, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {what}"
            with contextlib.suppress(asyncio.TimeoutError):
                await self.pump(min(left, 1.0))

    def of(self, method: str) -> list[dict]:
        return [e["params"] for e in self.events if e.get("method") == method]

    def frames(self) -> bytes:
        """What the page's websockets received (the lab's screen, as the terminal gets it)."""
        got = b""
        for p in self.of("Network.webSocketFrameReceived"):
            r = p["response"]
            got += (
                base64.b64decode(r["payloadData"])
                if r["opcode"] == 2
                else r["payloadData"].encode()
            )
        return got


# Keys as DevTools sends them: the page's focused element gets them, as it
# would a learner's typing.
NAMED_KEYS = {"Enter": (13, "\r"), "Escape": (27, "")}


async def press(page: Page, *keys: str) -> None:
    """Each of `keys`: a named key, or text typed a character at a time."""
    for k in keys:
        if k in NAMED_KEYS:
            code, text = NAMED_KEYS[k]
            down = {"key": k, "code": k, "windowsVirtualKeyCode": code}
            await page.call("Input.dispatchKeyEvent", type="keyDown", **down, text=text)
            await page.call("Input.dispatchKeyEvent", type="keyUp", **down)
            continue
        for ch in k:
            await page.call("Input.dispatchKeyEvent", type="keyDown", key=ch, text=ch)
            await page.call("Input.dispatchKeyEvent", type="keyUp", key=ch)


async def evaluate(page: Page, expression: str):
    return (await page.call("Runtime.evaluate", expression=expression, returnByValue=True))[
        "result"
    ].get("value")


async def browse(devtools: int, url: str, serve_pid: int, workspace: Path) -> dict:
    """A learner's visit: open the lab, press keys without clicking first,
    edit, check, quit; restart from the page; close the tab. Returns what
    was seen: the URLs the page asked for, and the labs left behind."""
    import aiohttp

    seen: dict = {}
    exercise = workspace / "exercises" / "copy_ceiling.py"
    state = workspace / ".gpulab" / "state.json"
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{devtools}/json/list") as r:
            target = next(t for t in await r.json() if t["type"] == "page")
        async with s.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            page = Page(ws)
            await page.call("Network.enable")
            await page.call("Page.enable")
            await page.call("Page.navigate", url=url)
            # A fresh workspace: the welcome, with its two buttons.
            await page.until(lambda: b"Look around" in page.frames(), 120, "the welcome")
            labs = lab_pids(serve_pid)
            assert labs, "no lab process under the server"
            # The terminal is on the page, drawn (xterm's screen element).
            assert await evaluate(page, "!!document.querySelector('#terminal .xterm-screen')")
            shot = await page.call("Page.captureScreenshot", format="png")
            assert len(base64.b64decode(shot["data"])) > 5_000  # not a blank page
            # No click first: a page that opened with the body focused lost
            # every key until the learner clicked into the terminal.
            # Enter starts lesson 01, 2 opens its exercise, e edits.
            await press(page, "Enter", "2", "e", "# typed in a browser", "Enter", "Escape")
            await page.until(
                lambda: exercise.read_text().startswith("# typed in a browser\n"),
                120,
                "the edit on disk",
            )
            await press(page, "c")
            await page.until(lambda: attempts(state, "copy_ceiling"), 240, "a check's result")
            # q ends the lab, and the page says so.
            await press(page, "q")
            await page.until(lambda: not lab_pids(serve_pid), 30, "the lab to quit")
            deadline = time.monotonic() + 10
            while not await evaluate(page, "document.body.classList.contains('-closed')"):
                assert time.monotonic() < deadline, "the page never said the session ended"
                await asyncio.sleep(0.2)
            seen["after_quit"] = await asyncio.to_thread(gone_within, labs, 5)
            # Its Restart button opens a lab again.
            await evaluate(page, "refresh()")
            await page.until(lambda: bool(lab_pids(serve_pid)), 120, "a lab after Restart")
            labs = lab_pids(serve_pid)
            seen["urls"] = [p["request"]["url"] for p in page.of("Network.requestWillBeSent")]
            seen["urls"] += [p["url"] for p in page.of("Network.webSocketCreated")]
            # Closing the tab closes its websocket: the lab must go.
            async with s.get(f"http://127.0.0.1:{devtools}/json/close/{target['id']}") as r:
                assert r.status == 200
        seen["after_close"] = await asyncio.to_thread(gone_within, labs, 5)
    return seen


def attempts(state: Path, exercise: str) -> list:
    """The attempts the lab recorded for `exercise` (none while it writes)."""
    try:
        return json.loads(state.read_text())["exercises"][exercise]["attempts"]
    except (OSError, ValueError, KeyError):
        return []


def test_chromium_a_learner_edits_checks_quits_and_closing_the_tab_ends_the_lab(tmp_path):
    port = free_port()
    with served(tmp_path, "--port", str(port), limit_s=600) as (proc, url, _printed):
        wait_for_port(port)
        serve_pid = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text())
        profile = Path(tempfile.mkdtemp(prefix="gpulab-chromium-"))
        try:
            with chromium(profile) as devtools:
                seen = asyncio.run(
                    asyncio.wait_for(browse(devtools, url, serve_pid, tmp_path / "workspace"), 560)
                )
        finally:
            shutil.rmtree(profile, ignore_errors=True)
    assert not seen["after_quit"], f"the lab {seen['after_quit']} still runs after q"
    assert not seen["after_close"], f"the closed tab's lab {seen['after_close']} still runs"
    urls = seen["urls"]
    assert any(u.startswith(("ws://", "wss://")) for u in urls), urls
    foreign = [
        u
        for u in urls
        if not u.startswith(("data:", "blob:"))
        and (urlsplit(u).hostname, urlsplit(u).port) != ("127.0.0.1", port)
    ]
    assert not foreign, f"the page asked other hosts: {foreign}"
