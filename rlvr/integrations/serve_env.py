"""`rlvr serve-env ID`: serve an rlvr env id as an OpenEnv server (see `rlvr.integrations.openenv`).

Kept apart from `openenv.py` so that building the command line never imports openenv-core.
OpenEnv servers have no authentication: bind to loopback or a private network.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env", metavar="ID", help="env id to serve, e.g. rlvr/ToolMath-v0 (see `rlvr list`)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind; 0 picks a free one (printed)")
    parser.add_argument("--env-kwargs", default="{}", metavar="JSON", help="keyword arguments of the env, a JSON object")
    parser.add_argument("--max-sessions", type=int, default=64, help="WebSocket sessions (env instances) at once")
    parser.add_argument("--session-timeout", type=float, default=None,
                        help="close a session idle this many seconds (default: never)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])


def run(args: argparse.Namespace) -> int:
    from rlvr.cli import UsageError

    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as exc:
        raise UsageError(f"rlvr serve-env: --env-kwargs is not JSON: {exc}") from None
    if not isinstance(env_kwargs, dict):
        raise UsageError(f"rlvr serve-env: --env-kwargs must be a JSON object, got {args.env_kwargs!r}")
    if args.max_sessions < 1:
        raise UsageError(f"rlvr serve-env: --max-sessions must be at least 1, got {args.max_sessions}")
    try:
        import uvicorn

        from rlvr.integrations.openenv import create_env_app
    except ImportError as exc:
        raise UsageError(f"rlvr serve-env: needs the 'interop' extra (pip install 'rlvr[interop]'): {exc}") from None
    from rlvr.integrations.serve import _bind, _exit_cleanly, _is_loopback

    app = create_env_app(args.env, env_kwargs, max_sessions=args.max_sessions, session_timeout=args.session_timeout)
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    if not _is_loopback(args.host):
        print(f"rlvr serve-env: warning: OpenEnv servers have no authentication and this one is bound to "
              f"{args.host}", file=sys.stderr)
    print(f"rlvr serve-env: {args.env} on http://{host}:{port} (OpenEnv; sessions at ws://{host}:{port}/ws)",
          flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, access_log=False))
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        server.run(sockets=[sock])
    finally:
        print("rlvr serve-env: stopped", flush=True)
    return 0
