"""A client for any OpenAI-compatible chat server (vLLM, SGLang, llama.cpp, OpenAI).

It lives apart from endpoint evaluation (`rlvr.evaluation.endpoint`) because the LLM judge, a verifier,
needs it too, and verifiers import neither envs nor the trainer: this module imports only
the standard library and httpx.

`ChatEndpoint.chat(messages)` returns the reply text; `message(messages)` the whole assistant
message, with any structured `tool_calls`. A request that times out, cannot connect or gets
a 429/5xx is retried with exponential backoff (and jitter); when the retries run out it
raises `EndpointError`, whose `kind` says what happened ("timeout", "unreachable", "http",
"malformed"), so callers can score an outage as `error` instead of as a wrong answer.

At most `max_concurrency` requests are in flight per endpoint, however many threads send
them: a request waits for a free slot before it starts, so the wait does not count against
its timeout, and backoff sleeps hold no slot.

`deadline` (an absolute `time.monotonic()` value, given per call) bounds a whole call, retries,
backoff and the wait for a slot included: what a verifier with a deadline on every check needs.
httpx's timeouts are per network operation, so a server that drip-feeds a byte at a time would
never trip them; under a deadline a watchdog shuts the attempt's socket down when its time is up.
Without one, `timeout` is httpx's (per read), so a long generation that keeps arriving is not cut.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
API_KEY_ENV = "RLVR_ENDPOINT_API_KEY"


class EndpointError(RuntimeError):
    """A chat request that failed for good (after retries). `kind`: timeout, unreachable, http, malformed."""

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.status = status  # the HTTP status, for kind "http"


def api_base(url: str) -> str:
    """The API root: a bare `http://host:port` gets `/v1`; a URL with a path is kept as given."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"endpoint URL must be a non-empty string, got {url!r}")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"endpoint URL must look like http://host:port[/v1], got {url!r}")
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path or '/v1'}"


def _token_logprobs(choice: Any) -> list[float] | None:
    """A chat completion's per-token log-probs (OpenAI's `logprobs.content[i].logprob`), or None when the
    server sent none, or sent them in another shape (a reply is never lost over its log-probs)."""
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
    try:
        return [float(t["logprob"]) for t in tokens] if isinstance(tokens, list) and tokens else None
    except (KeyError, TypeError, ValueError):
        return None


class _Cutoff:
    """Shuts an attempt's socket down after `seconds`, so a drip-feeding server cannot stretch it.

    The socket comes from httpcore's `trace` extension when the connection is made; the request
    then fails at once with a transport error, which the caller reads as a timeout (`fired`).
    Connections are not kept alive (see `ChatEndpoint._http`), so a late shutdown never hits
    another request.
    """

    def __init__(self, seconds: float):
        self.fired = False
        self._socket = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            with self._lock:
                self._socket = stream.get_extra_info("socket") if stream is not None else None
                if self.fired:
                    self._shutdown()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shutdown()

    def _shutdown(self) -> None:
        if self._socket is not None:
            try:
                self._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


class ChatEndpoint:
    """One model behind an OpenAI-compatible `/chat/completions` route.

    `timeout` is per request (seconds, per read unless a call gives a `deadline`); `retries` extra attempts follow a failed one,
    after `backoff * 2**attempt` seconds (capped at `max_backoff`, with jitter).
    `max_concurrency` bounds the requests in flight. The API key comes from `api_key` or
    the `RLVR_ENDPOINT_API_KEY` environment variable.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 60.0,
                 retries: int = 2, backoff: float = 0.5, max_backoff: float = 8.0, max_concurrency: int = 8):
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        for name, value, low in (("timeout", timeout, 0.0), ("backoff", backoff, 0.0), ("max_backoff", max_backoff, 0.0)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < low or \
                    (name == "timeout" and value == 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name, value, low in (("retries", retries, 0), ("max_concurrency", max_concurrency, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        self.base_url = api_base(base_url)
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_concurrency = max_concurrency
        self._setup()

    def _setup(self) -> None:
        self._client = None
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.max_concurrency)

    # Picklable (verifiers travel to worker processes): the HTTP client and the locks are rebuilt.
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_client", "_lock", "_slots")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    def _http(self):
        with self._lock:
            if self._client is None:
                import httpx

                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                # The slots bound the requests. No keep-alive: each attempt owns its connection, so the
                # cut-off of an attempt (`_Cutoff`) can never shut down a connection another one reuses.
                limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
                self._client = httpx.Client(base_url=self.base_url, headers=headers, limits=limits,
                                            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)))
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def chat(self, messages: Sequence[dict[str, Any]], *, deadline: float | None = None, **params: Any) -> str:
        """The reply text for `messages`. `params` go into the request body (max_tokens, temperature, seed, ...);
        `deadline` (a `time.monotonic()` value) ends the whole call, retries included, by then."""
        return self.message(messages, deadline=deadline, **params)["content"]

    def message(self, messages: Sequence[dict[str, Any]], *, deadline: float | None = None,
                **params: Any) -> dict[str, Any]:
        """The assistant message for `messages`: `content` (a string, "" when none), `tool_calls` (a list) and
        `logprobs`: each sampled token's log-prob when the server gave them (ask with `logprobs=True`), else None;
        `finish_reason` as the server gave it ("stop": an end-of-turn token or one of the request's `stop` strings).
        With a `deadline`, no attempt, backoff or wait for a slot runs past it (kind "timeout" then)."""
        body = {"model": self.model, "messages": [dict(m) for m in messages], **params}
        last: EndpointError | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
                if deadline is not None and time.monotonic() + delay >= deadline:
                    break  # no time left for another attempt: the last failure stands
                time.sleep(delay)
            limit = self.timeout if deadline is None else min(self.timeout, deadline - time.monotonic())
            if limit <= 0 or not self._slots.acquire(timeout=limit if deadline is not None else None):
                last = last or EndpointError("timeout", f"no reply from {self.base_url} by the deadline")
                break
            try:
                limit = self.timeout if deadline is None else min(self.timeout, deadline - time.monotonic())
                return self._once(body, limit, cut=deadline is not None)
            except EndpointError as exc:
                last = exc
                if exc.kind == "http" and exc.status not in RETRY_STATUS:
                    break
            finally:
                self._slots.release()
        raise last  # type: ignore[misc]

    def _once(self, body: dict[str, Any], limit: float, cut: bool) -> dict[str, Any]:
        """One attempt. With `cut` (a call with a deadline) it ends by `limit` seconds, last byte included;
        without, httpx's per-read `timeout` applies (a long generation that keeps arriving is not cut)."""
        import httpx

        cutoff = _Cutoff(limit) if cut else None
        extra = {"extensions": {"trace": cutoff.trace},
                 "timeout": httpx.Timeout(max(limit, 1e-3), connect=max(1e-3, min(limit, 10.0)))} if cutoff else {}
        try:
            response = self._http().post("/chat/completions", json=body, **extra)
        except httpx.TimeoutException as exc:
            raise EndpointError("timeout", f"no reply from {self.base_url} within {limit:g}s "
                                           f"({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            if cutoff is not None and cutoff.fired:
                raise EndpointError("timeout", f"no whole reply from {self.base_url} within {limit:g}s "
                                               "(cut off while it was still arriving)") from None
            raise EndpointError("unreachable", f"{self.base_url}: {type(exc).__name__}: {exc}") from None
        finally:
            if cutoff is not None:
                cutoff.cancel()
        if response.status_code != 200:
            raise EndpointError("http", f"{self.base_url} answered {response.status_code}: {response.text[:200]}",
                                response.status_code)
        try:
            choice = response.json()["choices"][0]
            message = choice["message"]
            content, calls = message.get("content"), message.get("tool_calls") or []
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise EndpointError("malformed", f"not a chat completion: {response.text[:200]!r}") from None
        if not isinstance(content, str):
            content = "" if content is None else str(content)
        return {"content": content, "tool_calls": calls if isinstance(calls, list) else [],
                "logprobs": _token_logprobs(choice), "finish_reason": choice.get("finish_reason")}

    def chat_many(self, conversations: Sequence[Sequence[dict[str, Any]]], **params: Any) -> list[str | EndpointError]:
        """Replies (or the `EndpointError` of each failed one) in input order; `max_concurrency` in flight."""
        def one(messages):
            try:
                return self.chat(messages, **params)
            except EndpointError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(one, conversations))

    def check(self) -> None:
        """Raise `EndpointError` unless the server answers a one-token chat request (used before long runs)."""
        self.chat([{"role": "user", "content": "Say OK."}], max_tokens=1, temperature=0.0)

    def __repr__(self) -> str:
        return f"ChatEndpoint({self.base_url!r}, model={self.model!r})"


__all__ = ["API_KEY_ENV", "RETRY_STATUS", "ChatEndpoint", "EndpointError", "api_base"]
