"""`rlvr serve`: run the HTTP reward server (see `rlvr.integrations.server` for the API).

The bearer token comes from the environment variable RLVR_SERVE_TOKEN or a file
(`--token-file`), never from the command line where `ps` would show it. On SIGTERM or
Ctrl-C the server stops accepting connections, finishes the requests in flight (up to
`--grace` seconds) and exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys

TOKEN_ENV = "RLVR_SERVE_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind; 0 picks a free one (printed)")
    parser.add_argument("--token-file", default=None,
                        help=f"file holding the bearer token (default: ${TOKEN_ENV}; unset = no auth)")
    parser.add_argument("--max-body-bytes", type=int, default=8 * 2**20, help="largest request body")
    parser.add_argument("--max-batch", type=int, default=1024, help="most items in one request")
    parser.add_argument("--max-chars", type=int, default=256 * 2**10, help="longest string in an item")
    parser.add_argument("--max-concurrency", type=int, default=8, help="batches scored at once")
    parser.add_argument("--no-request-options", action="store_true",
                        help="refuse per-request verifier options and env kwargs (they reach constructors, "
                             "including resource knobs such as math's workers)")
    parser.add_argument("--grace", type=float, default=30.0,
                        help="seconds to finish in-flight requests on shutdown")
    parser.add_argument("--register", action="append", default=[], metavar="NAME=MODULE:ATTR",
                        help="also serve a verifier from an importable module (repeatable)")
    parser.add_argument("--preload", action="append", default=[], metavar="NAME",
                        help="build this verifier before serving, so a bad name fails now (repeatable)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])


def run(args: argparse.Namespace) -> int:
    from rlvr.cli import UsageError

    try:
        import uvicorn

        from rlvr.integrations.scoring import ItemError, get_verifier
        from rlvr.integrations.server import ServerConfig, create_app
    except ImportError as exc:
        raise UsageError(f"rlvr serve: needs the 'serve' extra (pip install 'rlvr[serve]'): {exc}") from None
    from rlvr.registry import register_verifier

    for spec in args.register:
        name, sep, target = spec.partition("=")
        if not sep or not name or ":" not in target:
            raise UsageError(f"rlvr serve: --register expects NAME=MODULE:ATTR, got {spec!r}")
        register_verifier(name, target, f"served from {target}", replace=True)
    config = ServerConfig(max_body_bytes=args.max_body_bytes, max_batch=args.max_batch,
                          max_chars=args.max_chars, max_concurrency=args.max_concurrency,
                          token=_read_token(args.token_file), request_options=not args.no_request_options)
    for name in args.preload:
        try:
            get_verifier(name)
        except ItemError as exc:
            raise UsageError(f"rlvr serve: --preload {name}: {exc}") from None
    app = create_app(config)
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    if config.token is None and not _is_loopback(args.host):
        print(f"rlvr serve: warning: no token and bound to {args.host}; anyone who can reach it may use it",
              file=sys.stderr)
    print(f"rlvr serve: listening on http://{host}:{port}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, access_log=False,
                                           timeout_graceful_shutdown=args.grace, lifespan="off"))
    # uvicorn finishes in-flight requests on SIGTERM, then re-raises the signal to the handler it
    # found: make that a clean exit rather than death by signal.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        server.run(sockets=[sock])
    finally:
        print("rlvr serve: stopped", flush=True)
    return 0


def _exit_cleanly(signum, frame):
    raise SystemExit(0)


def _read_token(path: str | None) -> str | None:
    if path is None:
        return os.environ.get(TOKEN_ENV) or None
    with open(path, encoding="utf-8") as fh:
        token = fh.read().strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY on accepted sockets only then, and without it
    # every keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")
