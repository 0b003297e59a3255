"""`RemoteVerifier`: a verifier that scores on an `rlvr serve` server, usable wherever a verifier is.

Keeps heavy scoring (the code sandbox, say) on another machine while the trainer stays
where it is: `RewardFunc(RemoteVerifier("http://scorer:8000", "code"))` in TRL, or inside
a `Composite`. A batch goes out as one `POST /score` (split at `chunk` items). If the
server cannot be reached or fails (5xx), every completion scores 0 with reason `error`,
not the model's fault, and training goes on; a request the server refuses as malformed
(4xx) is a setup mistake and raises. The HTTP client is made on first use and left out of
the pickled state.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.verifiers.core import ERROR, Score, Verifier, align_batch

TOKEN_ENV = "RLVR_SERVE_TOKEN"


class RemoteVerifier(Verifier):
    """Verifier `verifier` (with `options`) of the server at `url`; token from `token` or $RLVR_SERVE_TOKEN."""

    def __init__(self, url: str, verifier: str, *, options: Mapping[str, Any] | None = None,
                 token: str | None = None, timeout: float = 120.0, chunk: int = 256, best: float = 1.0):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"RemoteVerifier url must start with http:// or https://, got {url!r}")
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        self.url = url.rstrip("/")
        self.verifier = verifier
        self.options = dict(options or {})
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.timeout = float(timeout)
        self.chunk = int(chunk)
        self.name = verifier
        self.best = float(best)
        self._client = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        return self.score_batch([completion], [reference], [task_fields])[0]

    def score_batch(self, completions: Sequence[Any], references: Sequence[Any] | None = None,
                    task_fields: Sequence[Mapping[str, Any]] | None = None) -> list[Score]:
        references, task_fields = align_batch(completions, references, task_fields)
        out: list[Score] = []
        for start in range(0, len(completions), self.chunk):
            stop = start + self.chunk
            items = [{"completion": c, "reference": r, "fields": dict(f)}
                     for c, r, f in zip(completions[start:stop], references[start:stop], task_fields[start:stop])]
            out.extend(self._post(items))
        return out

    def _post(self, items: list[dict[str, Any]]) -> list[Score]:
        import httpx

        if self._client is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self._client = httpx.Client(base_url=self.url, headers=headers, timeout=self.timeout)
        body = {"verifier": self.verifier, "items": items}
        if self.options:
            body["options"] = self.options
        try:
            response = self._client.post("/score", json=body)
        except httpx.HTTPError as exc:
            return [_failed(f"{self.url} unreachable: {type(exc).__name__}: {exc}")] * len(items)
        if response.status_code >= 500:
            return [_failed(f"{self.url} answered {response.status_code}: {_message(response)}")] * len(items)
        if response.status_code != 200:
            raise ValueError(f"{self.url} refused the request ({response.status_code}): {_message(response)}")
        return [Score(r["score"], r.get("reason"), r.get("components") or {}, r.get("reasons") or {},
                      r.get("info") or {}) for r in response.json()["results"]]

    def __repr__(self) -> str:
        return f"RemoteVerifier({self.url!r}, {self.verifier!r})"


def _failed(why: str) -> Score:
    return Score(0.0, ERROR, info={"why": why})


def _message(response) -> str:
    try:
        return str(response.json().get("error"))
    except ValueError:
        return response.text[:200]
