#!/usr/bin/env python
"""Load test of `rlvr serve`: N concurrent clients x M requests of mixed kinds, on loopback.

The server runs in its own process (`python -m rlvr serve --port 0`, with a bearer token).
Requests of three kinds are interleaved, each client cycling through them:
- `math`: batches of real GSM8K answers scored by the `math` verifier;
- `format`: batches of think-format completions scored by `think_format`;
- `code`: small batches of real HumanEval solutions run by the `code` verifier in the
  Docker sandbox (`mode: all`).
Half the items of every batch are right and half wrong, so every response can be checked:
a wrong score, a non-200 status or a transport failure counts as an error. The peer,
measured in the same run on the same batches, is the same scoring done in-process
(`score_items`), which is what an adapter pays without HTTP. It scores the batches with as
many at once as the server (`--max-concurrency` threads, as the server's limiter runs them):
`ratio_vs_in_process` is items/s over HTTP divided by items/s in-process at that concurrency.
The same batches scored one after another are reported beside it (`in_process_serial_items_per_s`).

The run is bounded: M requests per client, and `--max-seconds` after which the clients
stop early. The server is stopped with SIGTERM at the end and must exit 0.

    python bench/serve.py [--clients 128] [--requests 3] [--batch 16] [--code-batch 2] [--max-seconds 600]

Ends with `RESULT {"clients": ..., "errors": ..., "p50_ms": {kind: ...}, "p99_ms": {kind: ...}, ...}` and exits 1 if
any response (or in-process score) was wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GSM8K = ROOT.parent / "shared" / "datasets" / "gsm8k" / "test.jsonl"
HUMANEVAL = ROOT.parent / "shared" / "datasets" / "humaneval" / "HumanEval.jsonl"
TOKEN = "bench-serve-token"
KINDS = ("math", "format", "code")
REQUEST = {"math": {"verifier": "math"}, "format": {"verifier": "think_format"},
           "code": {"verifier": "code", "options": {"mode": "all"}}}


def make_batches(n_batches: int, batch: int) -> list[list[dict]]:
    """Batches of math items from GSM8K answers: even items right, odd items wrong."""
    answers = []
    with GSM8K.open() as fh:
        for line in fh:
            answers.append(json.loads(line)["answer"].split("####")[-1].strip().replace(",", ""))
    batches, k = [], 0
    for _ in range(n_batches):
        items = []
        for j in range(batch):
            answer = answers[k % len(answers)]
            k += 1
            given = answer if j % 2 == 0 else f"{answer}1"
            items.append({"completion": f"<think>Working it out step by step.</think> So the answer is "
                                        f"\\boxed{{{given}}}.", "reference": answer})
        batches.append(items)
    return batches


def make_format_batches(n_batches: int, batch: int) -> list[list[dict]]:
    """Think-format items: even items well formed, odd items broken in one of several ways."""
    broken = ["<think>never closed, answer 4", "answer first <think>then thinking</think>", "no tags at all",
              "<think></think><think>twice</think> 4"]
    return [[{"completion": f"<think>Step {b}.{j}: add the parts.</think> The answer is {b + j}." if j % 2 == 0
              else broken[(b + j) % len(broken)]} for j in range(batch)] for b in range(n_batches)]


def make_code_batches(n_batches: int, batch: int) -> list[list[dict]]:
    """HumanEval items: even items the canonical solution, odd items a stub that fails the tests."""
    tasks = [json.loads(line) for line in HUMANEVAL.read_text().splitlines()[:40]]
    batches, k = [], 0
    for _ in range(n_batches):
        items = []
        for j in range(batch):
            task = tasks[k % len(tasks)]
            k += 1
            body = task["prompt"] + (task["canonical_solution"] if j % 2 == 0 else "    return None\n")
            items.append({"completion": f"<think>I will write it.</think>\n```python\n{body}\n```",
                          "fields": {"tests": task["test"], "entry_point": task["entry_point"]}})
        batches.append(items)
    return batches


def expected(items: list[dict]) -> list[float]:
    return [1.0 if j % 2 == 0 else 0.0 for j in range(len(items))]


def start_server(max_concurrency: int) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, RLVR_SERVE_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr", "serve", "--port", "0", "--preload", "math", "--preload", "think_format",
         "--max-concurrency", str(max_concurrency)],
        env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.split("listening on ")[1].strip()


async def run_clients(url: str, batches: dict[str, list[list[dict]]], clients: int, requests: int,
                      max_seconds: float) -> tuple[dict[str, list[float]], dict[str, int], int, float]:
    import httpx

    latencies: dict[str, list[float]] = {kind: [] for kind in batches}
    errors = dict.fromkeys(batches, 0)
    sent = 0
    deadline = time.perf_counter() + max_seconds
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=max_seconds, limits=limits) as http:
        for _ in range(100):  # wait for /health (the server preloads the verifiers first)
            try:
                if (await http.get("/health")).status_code == 200:
                    break
            except httpx.TransportError:
                await asyncio.sleep(0.1)
        for kind in batches:  # warm-up, not counted (the code kind starts the sandbox pool)
            await http.post("/score", json={**REQUEST[kind], "items": batches[kind][0]})

        taken = dict.fromkeys(batches, 0)  # each kind's batches in order, each once: the peer scores the same ones

        async def client(c: int) -> None:
            nonlocal sent
            for r in range(requests):
                if time.perf_counter() > deadline:
                    return
                kind = KINDS[(c + r) % len(KINDS)]
                items = batches[kind][taken[kind] % len(batches[kind])]
                taken[kind] += 1
                start = time.perf_counter()
                try:
                    response = await http.post("/score", json={**REQUEST[kind], "items": items})
                    ok = response.status_code == 200 and \
                        [x["score"] for x in response.json()["results"]] == expected(items)
                except (httpx.HTTPError, ValueError, KeyError):
                    ok = False
                latencies[kind].append(time.perf_counter() - start)
                sent += 1
                errors[kind] += not ok

        started = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        elapsed = time.perf_counter() - started
    return latencies, errors, sent, elapsed


def in_process(batches: dict[str, list[list[dict]]], concurrency: int) -> tuple[float, int, int]:
    """The peer: the same batches scored in this process through the same engine, no HTTP,
    `concurrency` batches at once."""
    from concurrent.futures import ThreadPoolExecutor

    from rlvr.integrations.scoring import Item, score_items

    def items(kind, raw):
        return [Item(completion=i["completion"], reference=i.get("reference"), fields=i.get("fields", {}),
                     verifier=REQUEST[kind]["verifier"], options=REQUEST[kind].get("options", {})) for i in raw]

    def wrong(kind, raw) -> bool:
        return [r["score"] for r in score_items(items(kind, raw))] != expected(raw)

    for kind in batches:
        score_items(items(kind, batches[kind][0]))  # warm-up, not counted, as for the server
    work = [(kind, raw) for kind, kind_batches in batches.items() for raw in kind_batches]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        errors = sum(pool.map(lambda job: wrong(*job), work))
    return time.perf_counter() - started, errors, sum(len(raw) for _, raw in work)


def in_fresh_process(batches: dict[str, list[list[dict]]], concurrency: int) -> tuple[float, int, int]:
    """`in_process` in a fresh interpreter, so that neither in-process arm reuses the verdict and
    parse caches the other filled (the server, too, is its own process)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(in_process, batches, concurrency).result()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=128, help="concurrent clients (N)")
    parser.add_argument("--requests", type=int, default=3, help="requests per client (M), kinds in turn")
    parser.add_argument("--batch", type=int, default=16, help="items per math and format request")
    parser.add_argument("--code-batch", type=int, default=2, help="items per code request (sandbox runs)")
    parser.add_argument("--max-concurrency", type=int, default=8, help="the server's --max-concurrency")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="clients stop after this long")
    args = parser.parse_args(argv)
    for path in (GSM8K, HUMANEVAL):
        if not path.exists():
            raise SystemExit(f"{path} is missing")

    per_kind = -(-args.clients * args.requests // len(KINDS))
    batches = {"math": make_batches(per_kind, args.batch), "format": make_format_batches(per_kind, args.batch),
               "code": make_code_batches(per_kind, args.code_batch)}
    proc, url = start_server(args.max_concurrency)
    try:
        latencies, errors, sent, elapsed = asyncio.run(
            run_clients(url, batches, args.clients, args.requests, args.max_seconds))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    server_errors = 0
    if code != 0:
        server_errors = 1
        print(f"server exited with status {code} after SIGTERM", file=sys.stderr)

    done = {kind: batches[kind][:max(1, len(latencies[kind]))] for kind in KINDS}
    peer_s, peer_errors, peer_items = in_fresh_process(done, args.max_concurrency)
    serial_s, serial_errors, _ = in_fresh_process(done, 1)
    items_http = sum(len(b) for kind in KINDS for b in done[kind]) / elapsed
    items_peer, items_serial = peer_items / peer_s, peer_items / serial_s
    ms = {kind: [1000 * x for x in latencies[kind]] for kind in KINDS}
    result = {
        "clients": args.clients,
        "errors": sum(errors.values()) + server_errors,
        "p50_ms": {kind: round(statistics.median(ms[kind]), 1) for kind in KINDS if ms[kind]},
        "p99_ms": {kind: round(percentile(ms[kind], 0.99), 1) for kind in KINDS if ms[kind]},
        "requests": sent,
        "requests_by_kind": {kind: len(ms[kind]) for kind in KINDS},
        "errors_by_kind": errors,
        "requests_per_s": round(sent / elapsed, 2),
        "batch": {"math": args.batch, "format": args.batch, "code": args.code_batch},
        "items_per_s": round(items_http, 1),
        "in_process_items_per_s": round(items_peer, 1),
        "in_process_concurrency": args.max_concurrency,
        "in_process_serial_items_per_s": round(items_serial, 1),
        "in_process_errors": peer_errors + serial_errors,
        "ratio_vs_in_process": round(items_http / items_peer, 3),
        "seconds": round(elapsed, 1),
        "cpu_count": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    print(f"rlvr serve: {sent} requests from {args.clients} clients in {elapsed:.1f}s, {result['errors']} errors")
    for kind in KINDS:
        if ms[kind]:
            print(f"  {kind:<7} {len(ms[kind])} requests, p50 {result['p50_ms'][kind]} ms, "
                  f"p99 {result['p99_ms'][kind]} ms, {errors[kind]} errors")
    print(f"  HTTP {result['items_per_s']} items/s; in-process {result['in_process_items_per_s']} items/s "
          f"(same batches, same engine, {args.max_concurrency} at once; one at a time: "
          f"{result['in_process_serial_items_per_s']} items/s); ratio {result['ratio_vs_in_process']}")
    print("RESULT " + json.dumps(result))
    return result


if __name__ == "__main__":
    result = main()
    sys.exit(1 if result["errors"] or result["in_process_errors"] else 0)
