"""`gpulab serve`: the same app in a browser, through textual-serve.

textual-serve starts one `python -m gpulab` per browser tab and relays its
terminal over a websocket. The lab runs the learner's code, so whoever reaches
it runs code as the learner: gpulab.cli.webserve locks it as Jupyter does (a
token, a session cookie, same-origin websockets). It binds 127.0.0.1 by
default; `--unix PATH` serves on a socket file only its owner can open; any
other address needs `--allow-remote`, and even then an SSH tunnel or an
authenticating HTTPS proxy is the better road.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any


def command_line(args: Any) -> str:
    """The shell command textual-serve runs for each browser session."""
    parts = [sys.executable, "-m", "gpulab"]
    if getattr(args, "workspace", None):
        parts += ["--workspace", args.workspace]
    if getattr(args, "gradebook", None):  # the instructor's view, not the lab
        parts += ["grade", "view", "--course", str(Path(args.gradebook).expanduser().resolve())]
    return shlex.join(parts)


def _fail(message: str) -> int:
    print(f"gpulab: {message}", file=sys.stderr)
    return 2


def run(args: Any) -> int:
    if not 0 < args.port < 65536:
        return _fail(f"--port must be between 1 and 65535, got {args.port}")
    unix = Path(args.unix).expanduser().absolute() if args.unix else None
    gradebook = getattr(args, "gradebook", None)
    if gradebook and not (Path(gradebook).expanduser() / "gradebook.toml").is_file():
        return _fail(
            f"--gradebook {gradebook}: no gradebook.toml there (`gpulab grade init` makes one)"
        )
    if unix is not None and (args.host != "127.0.0.1" or args.port != 8000):
        return _fail("--unix serves on a socket file: leave out --host and --port")
    try:
        from gpulab.cli.webserve import LabServer, is_loopback_host
    except ImportError:
        return _fail(
            "gpulab serve needs textual-serve: pip install 'gpulab[serve]' "
            "(or pip install textual-serve)"
        )
    if unix is None and not is_loopback_host(args.host):
        if not args.allow_remote:
            return _fail(
                f"refusing to serve on {args.host}: anyone who can reach it could run "
                "code as you. Use an SSH tunnel to 127.0.0.1 (or --unix), or add "
                "--allow-remote if you must."
            )
        print(
            f"warning: serving on {args.host}: anyone who can reach this port and has the "
            "token runs code as you, over plain HTTP. Prefer an SSH tunnel to 127.0.0.1.",
            file=sys.stderr,
        )
    server = LabServer(command_line(args), host=args.host, port=args.port, unix_path=unix)
    # The address is the command's output: stdout, so `gpulab serve | tee` or a
    # script can take it; the words around it go to stderr.
    if unix is not None:
        url = f"http://localhost:8000{server.prefix}/?token={server.token}"
        print(
            f"gpulab: serving on the socket {unix} (only you can open it). From your "
            f"computer: ssh -L 8000:{unix} THIS_HOST, then open (ctrl+c stops):",
            file=sys.stderr,
        )
    else:
        host = f"[{args.host}]" if ":" in args.host else args.host
        url = f"http://{host}:{args.port}{server.prefix}/?token={server.token}"
        print("gpulab: open this address in a browser (ctrl+c stops):", file=sys.stderr)
    sys.stderr.flush()
    print(url, flush=True)
    try:
        server.serve()
    except OSError as exc:
        where = unix or f"{args.host}:{args.port}"
        return _fail(f"cannot serve on {where}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        pass
    return 0
