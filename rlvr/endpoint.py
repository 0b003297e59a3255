"""A client for any OpenAI-compatible chat server (vLLM, SGLang, llama.cpp, OpenAI) and `rlvr eval --endpoint`.

`ChatEndpoint.chat(messages)` returns the reply text. A request that times out, cannot
connect or gets a 429/5xx is retried with exponential backoff (and jitter); when the
retries run out it raises `EndpointError`, whose `kind` says what happened ("timeout",
"unreachable", "http", "malformed"), so callers can score an outage as `error` instead of
as a wrong answer. `chat_many` sends many conversations with at most `max_concurrency`
requests in flight.

`evaluate_endpoint` runs whole episodes of any env against a served model through the
Gymnasium API: reset -> messages -> the endpoint -> `env.step(reply)` -> the next
observation, until the env ends the episode, so multi-turn envs are evaluated on every
turn. pass@k is computed over each episode's final outcome.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_EPISODE_TURNS = 32  # a safety bound on envs that never end an episode
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


class ChatEndpoint:
    """One model behind an OpenAI-compatible `/chat/completions` route.

    `timeout` is per request (seconds); `retries` extra attempts follow a failed one,
    after `backoff * 2**attempt` seconds (capped at `max_backoff`, with jitter).
    The API key comes from `api_key` or the `RLVR_ENDPOINT_API_KEY` environment variable.
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
        self._client = None
        self._lock = threading.Lock()

    # Picklable (verifiers travel to worker processes): the HTTP client is rebuilt on first use.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _http(self):
        with self._lock:
            if self._client is None:
                import httpx

                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                limits = httpx.Limits(max_connections=self.max_concurrency,
                                      max_keepalive_connections=self.max_concurrency)
                self._client = httpx.Client(base_url=self.base_url, headers=headers, limits=limits,
                                            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)))
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def chat(self, messages: Sequence[dict[str, Any]], **params: Any) -> str:
        """The reply text for `messages`. `params` go into the request body (max_tokens, temperature, seed, ...)."""
        body = {"model": self.model, "messages": [dict(m) for m in messages], **params}
        last: EndpointError | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                time.sleep(delay * (0.5 + random.random() / 2))
            try:
                return self._once(body)
            except EndpointError as exc:
                last = exc
                if exc.kind == "http" and exc.status not in RETRY_STATUS:
                    break
        raise last  # type: ignore[misc]

    def _once(self, body: dict[str, Any]) -> str:
        import httpx

        try:
            response = self._http().post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise EndpointError("timeout", f"no reply from {self.base_url} within {self.timeout:g}s "
                                           f"({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise EndpointError("unreachable", f"{self.base_url}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise EndpointError("http", f"{self.base_url} answered {response.status_code}: {response.text[:200]}",
                                response.status_code)
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise EndpointError("malformed", f"not a chat completion: {response.text[:200]!r}") from None
        if not isinstance(content, str):
            content = "" if content is None else str(content)
        return content

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


# --- evaluation of a served model ------------------------------------------------------


def run_episode(env, endpoint: ChatEndpoint, index: int, params: dict[str, Any]) -> dict[str, Any]:
    """One episode of task `index` through the Gymnasium API; the served model answers every turn."""
    observation, _ = env.reset(options={"index": index})
    replies: list[str] = []
    info: dict[str, Any] = {}
    reward = 0.0
    for _ in range(MAX_EPISODE_TURNS):
        try:
            reply = endpoint.chat(observation, **params)
        except EndpointError as exc:
            return {"correct": False, "reward": 0.0, "reason": "error", "error": str(exc), "replies": replies,
                    "task_id": env.unwrapped.task.task_id, "turns": len(replies)}
        replies.append(reply)
        observation, reward, terminated, truncated, info = env.step(reply)
        if terminated or truncated:
            break
    return {"correct": bool(info.get("correct")), "reward": float(info.get("final_reward", reward)),
            "reason": info.get("score", {}).get("reason"), "replies": replies, "task_id": info.get("task_id"),
            "turns": len(replies)}


def evaluate_endpoint(env_id: str, endpoint: ChatEndpoint, *, n: int = 1, ks: Sequence[int] = (1,),
                      limit: int | None = None, env_kwargs: dict[str, Any] | None = None, max_tokens: int = 256,
                      temperature: float | None = None, top_p: float = 1.0, seed: int = 0,
                      keep_samples: bool = False, progress: bool = True):
    """pass@k of the served model on `env_id`: n episodes per task, `endpoint.max_concurrency` at a time.

    An episode the server failed (outage, timeout after retries) counts as not correct and
    is reported under the reason `error` (`result.reasons["error"]`).
    """
    import sys

    from tqdm import tqdm

    from rlvr.envs import make
    from rlvr.evaluate import DEFAULT_GENERATED_ITEMS, EvalResult, pass_at_k

    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if any(not isinstance(k, int) or not 1 <= k <= n for k in ks):
        raise ValueError(f"every k must be in 1..n (n={n}), got {list(ks)}")
    probe = make(env_id, **(env_kwargs or {}))
    size = probe.unwrapped.source.size
    probe.close()
    total = size if size is not None else DEFAULT_GENERATED_ITEMS
    if limit is not None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        total = min(total, limit)
    greedy = temperature is None and n == 1
    local = threading.local()
    envs: list[Any] = []

    def episode(unit: tuple[int, int]) -> tuple[int, dict[str, Any]]:
        index, sample = unit
        if not hasattr(local, "env"):
            local.env = make(env_id, **(env_kwargs or {}))
            envs.append(local.env)
        params = {"max_tokens": max_tokens, "temperature": 0.0 if greedy else (1.0 if temperature is None else temperature),
                  "top_p": top_p, "seed": seed * 1_000_003 + index * n + sample}
        return index, run_episode(local.env, endpoint, index, params)

    units = [(i, j) for i in range(total) for j in range(n)]
    outcomes: dict[int, list[dict[str, Any]]] = {i: [] for i in range(total)}
    with ThreadPoolExecutor(max_workers=endpoint.max_concurrency) as pool, \
            tqdm(total=len(units), desc=f"eval {env_id}", unit="episode", disable=not progress, file=sys.stderr) as bar:
        for index, outcome in pool.map(episode, units):
            outcomes[index].append(outcome)
            bar.update(1)
    for env in envs:
        env.close()
    reasons: Counter[str] = Counter()
    samples = []
    sums = dict.fromkeys(ks, 0.0)
    reward_sum = 0.0
    for index in range(total):
        correct = sum(o["correct"] for o in outcomes[index])
        for k in ks:
            sums[k] += pass_at_k(n, correct, k)
        for o in outcomes[index]:
            reward_sum += o["reward"]
            if o["reason"]:
                reasons[o["reason"]] += 1
            if keep_samples:
                samples.append({"task_id": o["task_id"], "completion": o["replies"][-1] if o["replies"] else "",
                                "turns": o["turns"], "replies": o["replies"], "reward": o["reward"],
                                "correct": o["correct"], "reason": o["reason"], **({"error": o["error"]} if "error" in o else {})})
    return EvalResult(env=env_id, items=total, n=n, pass_at={k: sums[k] / total for k in ks},
                      mean_reward=reward_sum / (total * n), reasons=dict(reasons.most_common()), samples=samples)


def run_eval(args: Any, env_kwargs: dict[str, Any], ks: Sequence[int]):
    """`rlvr eval --endpoint URL --model NAME`: check the server answers, then evaluate (one-line errors)."""
    from rlvr.cli import UsageError

    if args.policy or not args.model:
        raise UsageError("rlvr eval: --endpoint URL goes with --model NAME (the served model's name), not --policy")
    if args.concurrency < 1 or args.timeout <= 0:
        raise UsageError("rlvr eval: --concurrency must be at least 1 and --timeout positive")
    try:
        endpoint = ChatEndpoint(args.endpoint, args.model, timeout=args.timeout, max_concurrency=args.concurrency)
    except ValueError as exc:
        raise UsageError(f"rlvr eval: {exc}") from None
    try:
        endpoint.check()
    except EndpointError as exc:
        raise UsageError(f"rlvr eval: the endpoint did not answer ({exc})") from None
    try:
        return evaluate_endpoint(args.env, endpoint, n=args.n, ks=ks, limit=args.limit, env_kwargs=env_kwargs,
                                 max_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                                 seed=args.seed, keep_samples=bool(args.output), progress=not args.no_progress)
    finally:
        endpoint.close()
