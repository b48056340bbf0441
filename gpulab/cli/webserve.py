"""The web server behind `gpulab serve`: textual-serve, locked the way Jupyter is.

Whoever reaches a lab runs code as its owner (edit, then check). On a shared
GPU box that includes every other user of the machine, and any web page open
in the owner's browser. So, as Jupyter Server does:

- A random token, printed in the URL, is required on every request and
  compared in constant time. Its first use trades it for an HttpOnly,
  SameSite=Strict session cookie and redirects to the bare URL, so the token
  leaves the address bar and the history.
- The lab lives under a random path (`/<secret>/`), and the cookie is only
  sent below it. A browser sends a cookie to every port of the host that set
  it: another user's server on 127.0.0.1:9999, visited once (any page can
  send the browser there), received the session cookie of the lab on port
  8000 and drove it. It now never sees a path the cookie is sent to.
- The websocket (the lab itself) refuses a cross-origin upgrade: browsers let
  any page open a websocket to 127.0.0.1, CORS does not apply to them.
- Served on a loopback address, a Host header that is not a loopback name is
  refused: a DNS-rebinding page then cannot even reach the login.
- A Unix socket (created 0600) leaves TCP out entirely; reach it with
  `ssh -L 8000:/path/to.sock host`.

Each tab's lab runs in a session of its own (no shell in between), so a
closed tab, a stopped server, or a check the lab started cannot leave a
process behind: it is asked to quit, then its group is killed. A lab whose
server died outright quits on its own when its input ends
(gpulab.tui.webdriver).

Imports aiohttp and textual-serve: imported only by `gpulab serve`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import shlex
import signal
import socket
import stat
from pathlib import Path
from typing import Any, TypedDict

import aiohttp
import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int
from yarl import URL

from gpulab.wire.protocol import Kwargs

log = logging.getLogger("gpulab.serve")

# The address `gpulab serve` prints must fit an 80-column terminal: one that
# wrapped (95 characters, with 32 and 16 bytes) was copied in two pieces.
# 24 + 9 bytes: http://127.0.0.1:8000/<12>/?token=<32> is 75 characters.
TOKEN_BYTES = 24  # 192 bits, as Jupyter's default token (48 hex digits)
PREFIX_BYTES = 9  # the lab's path: unknown to other users' servers (see above)
# A lab asked to quit saves the file being edited and stops its check: that
# takes well under a second. Then SIGTERM, then SIGKILL, to its whole group.
QUIT_GRACE_S = 3.0
TERM_GRACE_S = 1.0
# Waiting for handlers once every lab is stopped: nothing should be left.
SHUTDOWN_TIMEOUT_S = 3.0
WEB_DRIVER = "gpulab.tui.webdriver:LabWebDriver"
TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "serve"

FORBIDDEN = """gpulab: this lab needs its token.

Open the address that `gpulab serve` printed when it started: it ends in
?token=... . The token keeps other users of this machine, and other web
pages in your browser, out of your lab (which runs code as you).
Followed that address from a link on another site? Reload this page: the
session cookie is only sent once the visit starts here (SameSite=Strict).
"""


def is_loopback_host(host: str) -> bool:
    """True for names that only ever mean this machine."""
    name = host.strip().lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def _authority(scheme: str, host_header: str) -> tuple[str, int | None] | None:
    """(host, port) of a Host header, the port filled in from the scheme."""
    try:
        url = URL(f"{scheme}://{host_header}")
    except ValueError:
        return None
    return (url.host or "").lower(), url.port


def same_origin(origin: str, request: web.BaseRequest) -> bool:
    """The websocket's Origin names the server the page was loaded from."""
    try:
        o = URL(origin)
    except ValueError:
        return False
    if o.scheme not in ("http", "https") or not o.host:
        return False  # "null" (a sandboxed frame, a file:// page) included
    return _authority(o.scheme, request.host) == ((o.host or "").lower(), o.port)


def bind_unix_socket(path: Path) -> socket.socket:
    """A listening socket at `path`, mode 0600 from its creation on.

    An existing socket nobody answers on is a leftover and is replaced; a live
    one, or anything that is not a socket, is left alone (OSError)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise OSError(f"{path} exists and is not a socket; not replacing it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)  # a server that died without cleaning up
        else:
            raise OSError(f"{path} is in use by another server")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # The umask decides the mode at bind(): no moment when others may connect.
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    # Listening now, not when the event loop starts: a client that finds the
    # file connects (queued) instead of being refused, and a second gpulab
    # does not take this socket for a dead one.
    sock.listen(128)
    return sock


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is empty: everyone in it has exited


class IndexPage(TypedDict):
    """What textual-serve's page template (app_index.html) reads."""

    font_size: int
    app_websocket_url: str
    config: dict[str, dict[str, str]]  # {"static": {"url": ...}}
    application: dict[str, str]  # {"name": ...}


class LabAppService(AppService):
    """One tab's lab: its own session, and a stop that always ends it.

    textual-serve's own runs `/bin/sh -c COMMAND` in the server's process
    group, asks it to quit and waits as long as that takes, and stops reading
    its output once the tab has gone (a lab that then writes blocks)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stopping: asyncio.Future[None] | None = None

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        env = super()._build_environment(width=width, height=height)
        env["TEXTUAL_DRIVER"] = WEB_DRIVER
        return env

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        self._process = process = await asyncio.create_subprocess_exec(
            *shlex.split(self.command),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,  # its group is its own: checks it starts included
        )
        self._stdin = process.stdin
        return process

    async def on_data(self, payload: bytes) -> None:
        # A tab that has gone still gets the lab's output read (and dropped):
        # otherwise a lab on its way out blocks on a full pipe.
        try:
            await self.remote_write_bytes(payload)
        except (ConnectionError, RuntimeError):
            pass

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def stop(self) -> None:
        """Ask the lab to quit, then end its group for sure; safe to call twice."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        process = self._process
        if process is None:
            return
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        if process.returncode is None:
            await self.send_meta({"type": "quit"})
            for sig, grace in ((None, QUIT_GRACE_S), (signal.SIGTERM, TERM_GRACE_S)):
                if sig is not None:
                    _signal_group(process.pid, sig)
                try:
                    await asyncio.wait_for(process.wait(), grace)
                    break
                except asyncio.TimeoutError:
                    log.warning("the lab %s did not quit within %.0f s", process.pid, grace)
        # Whatever is left in its group (a check's processes) goes with it.
        _signal_group(process.pid, signal.SIGKILL)
        if self._task is not None:
            # Its output ends with it, unless something outside its group holds
            # the pipe: then stop reading rather than wait on a stranger.
            try:
                await asyncio.wait_for(asyncio.shield(self._task), TERM_GRACE_S)
            except asyncio.TimeoutError:
                self._task.cancel()
            self._task = None


class LabServer(Server):
    """textual-serve's Server with a token, a session cookie and origin checks."""

    def __init__(
        self,
        command: str,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        unix_path: Path | None = None,
        token: str | None = None,
        title: str = "gpulab",
    ) -> None:
        # Our page (gpulab/data/serve): textual-serve's asks Google for a font.
        super().__init__(command, host=host, port=port, title=title, templates_path=TEMPLATES)
        self.token = token or secrets.token_urlsafe(TOKEN_BYTES)
        # The cookie carries a session secret of its own, never the token.
        self.session = secrets.token_urlsafe(32)  # never printed: its length costs nothing
        # Every route is below it, and so is the cookie's Path.
        self.prefix = "/" + secrets.token_urlsafe(PREFIX_BYTES)
        self.unix_path = unix_path
        # Cookies ignore ports: two labs on one host need two names.
        where = (
            f"unix-{hashlib.sha256(str(unix_path).encode()).hexdigest()[:8]}"
            if unix_path
            else str(port)
        )
        self.cookie = f"gpulab-session-{where}"
        self.loopback_only = unix_path is None and is_loopback_host(host)
        # The open tabs and their labs, stopped on the way out.
        self.labs: set[LabAppService] = set()
        self.sockets: set[web.WebSocketResponse] = set()

    # --- who may come in ------------------------------------------------------
    @staticmethod
    def _equal(given: str, secret: str) -> bool:
        # Bytes: compare_digest refuses non-ASCII str, which a query may hold.
        return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode())

    def _authorised(self, request: web.Request) -> bool:
        cookie = request.cookies.get(self.cookie)
        if cookie is not None and self._equal(cookie, self.session):
            return True
        token = request.query.get("token")
        if token is not None and self._equal(token, self.token):
            return True
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "token" and self._equal(value.strip(), self.token)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.loopback_only:
            authority = _authority("http", request.host)
            if authority is None or not is_loopback_host(authority[0]):
                return web.Response(
                    status=403, text="gpulab: this lab answers to localhost / 127.0.0.1 only.\n"
                )
        if request.path == self.prefix + "/ws":
            # Browsers always send Origin on a websocket; tools without one
            # (curl, scripts) are no cross-site risk and still need the token.
            origin = request.headers.get("Origin")
            if origin is not None and not same_origin(origin, request):
                return web.Response(status=403, text="gpulab: cross-origin websocket refused.\n")
        if not self._authorised(request):
            return web.Response(status=403, text=FORBIDDEN)
        if "token" in request.query and request.path == self.prefix + "/":
            # Trade the token for the cookie, and take it out of the address bar.
            rest = [(k, v) for k, v in request.query.items() if k != "token"]
            response = web.Response(
                status=302, headers={"Location": str(request.rel_url.with_query(rest))}
            )
            response.set_cookie(
                self.cookie, self.session, httponly=True, samesite="Strict", path=self.prefix + "/"
            )
            return response
        return await handler(request)

    @staticmethod
    async def _headers(request: web.Request, response: web.StreamResponse) -> None:
        # No framing (clickjacking the keyboard into the lab), no URL in Referer.
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Cache-Control", "no-store")

    # --- textual-serve, adapted -------------------------------------------------
    async def _make_app(self) -> web.Application:
        lab = await super()._make_app()
        lab.middlewares.append(self._guard)
        # textual-serve's routes, below the lab's secret path; anything
        # else is answered as a request without the token is.
        app = web.Application()
        app.add_subapp(self.prefix, lab)
        app.router.add_route("*", "/{anything:.*}", self._elsewhere)
        app.on_response_prepare.append(self._headers)  # the lab's responses too
        return app

    @staticmethod
    async def _elsewhere(request: web.Request) -> web.Response:
        return web.Response(status=403, text=FORBIDDEN)

    def initialize_logging(self) -> None:
        """textual-serve's logging, without the locals in tracebacks (secrets)."""
        from rich.logging import RichHandler

        logging.basicConfig(
            level="DEBUG" if self.debug else "INFO",
            format="%(message)s",
            handlers=[
                RichHandler(
                    show_path=False, show_time=False, rich_tracebacks=True, console=self.console
                )
            ],
        )

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: `gpulab serve` prints the address (with its token) itself."""

    async def on_shutdown(self, app: web.Application) -> None:
        """Stop every lab and close every tab, before aiohttp waits for them."""
        await asyncio.gather(*(lab.stop() for lab in list(self.labs)), return_exceptions=True)
        await asyncio.gather(
            *(ws.close(code=aiohttp.WSCloseCode.GOING_AWAY) for ws in list(self.sockets)),
            return_exceptions=True,
        )

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's, with a lab that is stopped however the tab ends."""
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        lab = LabAppService(
            self.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
            debug=self.debug,
        )
        self.labs.add(lab)
        self.sockets.add(websocket)
        try:
            await lab.start(width, height)
            await self._process_messages(websocket, lab)
        except asyncio.CancelledError:
            pass
        except Exception as error:  # a malformed message: end this tab, not the server
            log.exception(error)
        finally:
            try:
                await lab.stop()
            finally:
                self.labs.discard(lab)
                self.sockets.discard(websocket)
                await websocket.close()
        return websocket

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> IndexPage:
        # URLs from the request, not from the bind address: behind `ssh -L`
        # or a Unix socket the browser knows the server by another name.
        origin = request.url.origin()
        ws_scheme = "wss" if origin.scheme == "https" else "ws"
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": str(origin.with_scheme(ws_scheme).with_path(self.prefix + "/ws")),
            "config": {"static": {"url": str(origin.with_path(self.prefix + "/static/"))}},
            "application": {"name": self.title},
        }

    def serve(self, debug: bool = False) -> None:
        """Run until SIGINT/SIGTERM, on the TCP address or the Unix socket."""
        self.debug = debug
        self.initialize_logging()
        sock = bind_unix_socket(self.unix_path) if self.unix_path else None
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.request_exit)
            except NotImplementedError:  # pragma: no cover - not on POSIX
                pass
        # run_app's keyword arguments for where it listens: a socket, or a host and port.
        where: Kwargs = {"sock": sock} if sock else {"host": self.host, "port": self.port}
        try:
            # access_log=None: request lines would print URLs that hold the token.
            web.run_app(
                self._make_app(),
                handle_signals=False,
                loop=loop,
                access_log=None,
                print=lambda *args: None,
                shutdown_timeout=SHUTDOWN_TIMEOUT_S,
                **where,
            )
        finally:
            if sock is not None and self.unix_path is not None:
                self.unix_path.unlink(missing_ok=True)
