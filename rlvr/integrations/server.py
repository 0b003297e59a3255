"""The HTTP reward server behind `rlvr serve` (FastAPI on uvicorn).

Endpoints: `POST /score` (a batch of items, each named by verifier or env id),
`POST /openrlhf/{verifier}` (OpenRLHF's remote reward-model format), `GET /verifiers`
and `GET /health` (the only one open without the token). Every error is a JSON body
`{"error": "...", ...}` with a 4xx status for the caller's mistakes, and the server keeps
serving. Scoring runs in worker threads through `rlvr.integrations.scoring`, so requests
share the verifiers' own process pools with in-process use; at most `max_concurrency`
batches score at once and the rest wait their turn.

The size limits are checked before anything is parsed: the body in bytes (413, read in
chunks so a lying or absent Content-Length cannot get past), then the batch length (413)
and every string in an item (422).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from rlvr import __version__
from rlvr.integrations.scoring import Item, ItemError, score_items
from rlvr.registry import list_envs, list_verifiers

OPEN_PATHS = frozenset({"/health"})
logger = logging.getLogger("rlvr.serve")


@dataclass(frozen=True)
class ServerConfig:
    """Limits and access of one server. `token=None` leaves it open (bind it to loopback then)."""

    max_body_bytes: int = 8 * 2**20
    max_batch: int = 1024
    max_chars: int = 256 * 2**10
    max_concurrency: int = 8
    token: str | None = None
    request_options: bool = True  # False: callers may not pass verifier options or env kwargs

    def __post_init__(self):
        for name in ("max_body_bytes", "max_batch", "max_chars", "max_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.token is not None and not self.token.strip():
            raise ValueError("the bearer token is empty")


class ItemIn(BaseModel):
    """One item of `POST /score`; `verifier`/`env`/`options` default to the request's."""

    model_config = ConfigDict(extra="forbid", strict=True)
    completion: str | list[dict[str, Any]]
    reference: Any = None
    fields: dict[str, Any] = Field(default_factory=dict)
    verifier: str | None = None
    env: str | None = None
    options: dict[str, Any] | None = None
    seed: int | None = None


class ScoreIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    items: list[ItemIn]
    verifier: str | None = None
    env: str | None = None
    options: dict[str, Any] | None = None


class OpenRLHFIn(BaseModel):
    """OpenRLHF's remote reward-model request: full texts, their prompts, and the labels."""

    model_config = ConfigDict(extra="ignore", strict=True)
    query: list[str]
    prompts: list[str] | None = None
    labels: list[Any] | None = None


def create_app(config: ServerConfig | None = None):
    """An ASGI app (FastAPI behind the token and body-size guard) serving rlvr's verifiers and envs."""
    config = config or ServerConfig()
    app = FastAPI(title="rlvr reward server", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url=None)
    limiter = anyio.CapacityLimiter(config.max_concurrency)
    state = {"in_flight": 0, "served": 0, "started": time.time()}

    async def run_scoring(fn, *args):
        state["in_flight"] += 1
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)
        except ItemError as exc:
            raise HTTPException(422, str(exc)) from None
        except Exception as exc:  # a verifier bug: answer 500 on a connection that stays usable, log it
            logger.exception("scoring failed")
            raise HTTPException(500, f"internal error: {type(exc).__name__}: {exc}") from None
        finally:
            state["in_flight"] -= 1
            state["served"] += 1

    @app.exception_handler(StarletteHTTPException)  # ours, and the router's 404/405
    async def _http_error(request, exc: StarletteHTTPException):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc: RequestValidationError):
        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":
            return JSONResponse({"error": "the body is not valid JSON"}, status_code=422)
        if "json" not in request.headers.get("content-type", ""):
            return JSONResponse({"error": "send the body as JSON (Content-Type: application/json)"},
                                status_code=415)
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in errors[:20]]
        first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"][1:]) or "body"
        return JSONResponse({"error": f"{where}: {first['msg']}", "detail": detail}, status_code=422)

    @app.exception_handler(Exception)
    async def _crash(request, exc: Exception):
        return JSONResponse({"error": f"internal error: {type(exc).__name__}: {exc}"}, status_code=500)

    @app.get("/health")
    async def health():
        return {"status": "ok", "version": __version__, "in_flight": state["in_flight"],
                "served": state["served"], "uptime_s": round(time.time() - state["started"], 1)}

    @app.get("/verifiers")
    async def verifiers():
        return {"verifiers": list_verifiers(), "envs": list_envs()}

    @app.post("/score")
    async def score(request: ScoreIn):
        _check_batch(len(request.items), config)
        if not config.request_options and (request.options or any(it.options for it in request.items)):
            raise HTTPException(422, "this server takes no options: it was started with --no-request-options")
        items = [_to_item(i, it, request) for i, it in enumerate(request.items)]
        for i, it in enumerate(request.items):
            _check_strings(dict(it), f"items.{i}", config.max_chars)
        started = time.perf_counter()
        results = await run_scoring(score_items, items)
        # Score dicts are JSON-ready: skip FastAPI's generic encoder, a quarter of the scoring time.
        return JSONResponse({"results": results, "elapsed_ms": round(1000 * (time.perf_counter() - started), 3)})

    @app.post("/openrlhf/{verifier}")
    async def openrlhf(verifier: str, request: OpenRLHFIn):
        from rlvr.integrations.openrlhf import score_queries

        _check_batch(len(request.query), config)
        _check_strings(request.model_dump(), "body", config.max_chars)
        return JSONResponse(await run_scoring(
            lambda: score_queries(request.query, request.prompts, request.labels, verifier=verifier)))

    return _Guard(app, config)


def _to_item(i: int, it: ItemIn, request: ScoreIn) -> Item:
    verifier, env = it.verifier, it.env
    if verifier is None and env is None:
        verifier, env = request.verifier, request.env
    if (verifier is None) == (env is None):
        raise HTTPException(422, f"items.{i}: give exactly one of 'verifier' or 'env' (on the item or the request)")
    options = it.options if it.options is not None else (request.options or {})
    if env is not None and it.seed is None:
        raise HTTPException(422, f"items.{i}: an env item needs the 'seed' that chose its prompt")
    return Item(completion=it.completion, reference=it.reference, fields=it.fields, verifier=verifier,
                env=env, options=options, seed=it.seed)


def _check_batch(n: int, config: ServerConfig) -> None:
    if n == 0:
        raise HTTPException(422, "the batch is empty")
    if n > config.max_batch:
        raise HTTPException(413, f"batch of {n} items is over the limit of {config.max_batch}")


def _check_strings(value: Any, where: str, limit: int) -> None:
    """Reject any string (keys included) longer than `limit` characters, naming where it is."""
    stack = [(value, where)]
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, str):
            if len(obj) > limit:
                raise HTTPException(422, f"{path}: string of {len(obj)} characters is over the limit of {limit}")
        elif isinstance(obj, dict):
            for k, v in obj.items():
                stack.append((k, f"{path} (a key)"))
                stack.append((v, f"{path}.{k}"))
        elif isinstance(obj, list):
            stack.extend((v, f"{path}.{j}") for j, v in enumerate(obj))


class _Guard:
    """ASGI wrapper: bearer token, then body size, before the app reads or parses anything."""

    def __init__(self, app: FastAPI, config: ServerConfig):
        self.app = app
        self.config = config
        self._expected = f"Bearer {config.token}".encode() if config.token else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self._expected is not None and scope.get("path") not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                return await _reply(send, 401, "missing or wrong bearer token",
                                    [(b"www-authenticate", b"Bearer")])
        limit = self.config.max_body_bytes
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await _reply(send, 413, f"request body over the limit of {limit} bytes")
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return await _reply(send, 413, f"request body over the limit of {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


async def _reply(send, status: int, message: str, headers: list | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
