"""`gpulab serve`: the same app in a browser, through textual-serve.

textual-serve starts one `python -m gpulab` per browser tab and relays its
terminal over a websocket. It binds to 127.0.0.1 by default: the lab runs
the learner's code, so it must not be reachable from the network unless
someone asks for it (--host 0.0.0.0), and then only behind an SSH tunnel or
a proxy with authentication.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any


def command_line(args: Any) -> str:
    """The shell command textual-serve runs for each browser session."""
    parts = [sys.executable, "-m", "gpulab"]
    if getattr(args, "workspace", None):
        parts += ["--workspace", args.workspace]
    return shlex.join(parts)


def run(args: Any) -> int:
    if not 0 < args.port < 65536:
        print(f"gpulab: --port must be between 1 and 65535, got {args.port}", file=sys.stderr)
        return 2
    try:
        from textual_serve.server import Server
    except ImportError:
        print("gpulab serve needs textual-serve: pip install 'gpulab[serve]' "
              "(or pip install textual-serve)", file=sys.stderr)
        return 2
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}: anyone who can reach this port can run code "
              "as you. Prefer an SSH tunnel to 127.0.0.1.", file=sys.stderr)
    print(f"gpulab: open http://{args.host}:{args.port} in a browser (ctrl+c stops)",
          file=sys.stderr)
    try:
        Server(command_line(args), host=args.host, port=args.port, title="gpulab").serve()
    except OSError as exc:
        print(f"gpulab: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
