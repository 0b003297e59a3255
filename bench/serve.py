#!/usr/bin/env python
"""Load test of `rlvr serve`: N concurrent clients x M requests from this process, on loopback.

The server runs in its own process (`python -m rlvr serve --port 0`, with a bearer token)
and scores batches of real GSM8K answers with the `math` verifier, half of them right and
half wrong, so every response can be checked: a wrong score, a non-200 status or a
transport failure counts as an error. The peer, measured in the same run on the same
batches, is the same scoring done in-process (`score_items`, one batch after another),
which is what an adapter pays without HTTP; `ratio_vs_in_process` is items/s over HTTP
divided by items/s in-process.

The run is bounded: M requests per client, and `--max-seconds` after which the clients
stop early. The server is stopped with SIGTERM at the end and must exit 0.

    python bench/serve.py [--clients 8] [--requests 50] [--batch 16] [--max-seconds 120]

Ends with `RESULT {"requests_per_s": ..., "p50_ms": ..., "p99_ms": ..., "errors": ...}`.
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
TOKEN = "bench-serve-token"


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


def expected(items: list[dict]) -> list[float]:
    return [1.0 if j % 2 == 0 else 0.0 for j in range(len(items))]


def start_server(max_concurrency: int) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, RLVR_SERVE_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr", "serve", "--port", "0", "--preload", "math",
         "--max-concurrency", str(max_concurrency)],
        env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.split("listening on ")[1].strip()


async def run_clients(url: str, batches: list[list[dict]], clients: int, requests: int,
                      max_seconds: float) -> tuple[list[float], int, int, float]:
    import httpx

    latencies: list[float] = []
    errors = 0
    sent = 0
    deadline = time.perf_counter() + max_seconds
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as http:
        for _ in range(100):  # wait for /health (the server preloads the math verifier first)
            try:
                if (await http.get("/health")).status_code == 200:
                    break
            except httpx.TransportError:
                await asyncio.sleep(0.1)
        await http.post("/score", json={"verifier": "math", "items": batches[0]})  # warm-up, not counted

        async def client(c: int) -> None:
            nonlocal errors, sent
            for r in range(requests):
                if time.perf_counter() > deadline:
                    return
                items = batches[(c * requests + r) % len(batches)]
                start = time.perf_counter()
                try:
                    response = await http.post("/score", json={"verifier": "math", "items": items})
                    ok = response.status_code == 200 and \
                        [x["score"] for x in response.json()["results"]] == expected(items)
                except (httpx.HTTPError, ValueError, KeyError):
                    ok = False
                latencies.append(time.perf_counter() - start)
                sent += 1
                errors += not ok

        started = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        elapsed = time.perf_counter() - started
    return latencies, errors, sent, elapsed


def in_process(batches: list[list[dict]]) -> tuple[float, int]:
    """The peer: the same batches scored in this process through the same engine, no HTTP."""
    from rlvr.integrations.scoring import Item, score_items

    items = [[Item(completion=i["completion"], reference=i["reference"], verifier="math") for i in b]
             for b in batches]
    score_items(items[0])  # warm-up, not counted, as for the server
    errors = 0
    started = time.perf_counter()
    for batch, raw in zip(items, batches):
        errors += [r["score"] for r in score_items(batch)] != expected(raw)
    return time.perf_counter() - started, errors


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (N)")
    parser.add_argument("--requests", type=int, default=50, help="requests per client (M)")
    parser.add_argument("--batch", type=int, default=16, help="items per request")
    parser.add_argument("--max-concurrency", type=int, default=8, help="the server's --max-concurrency")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="clients stop after this long")
    args = parser.parse_args(argv)
    if not GSM8K.exists():
        raise SystemExit(f"{GSM8K} is missing")

    batches = make_batches(args.clients * args.requests, args.batch)
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
    if code != 0:
        errors += 1
        print(f"server exited with status {code} after SIGTERM", file=sys.stderr)

    peer_s, peer_errors = in_process(batches[:sent] or batches[:1])
    items_http = sent * args.batch / elapsed
    items_peer = len(batches[:sent] or batches[:1]) * args.batch / peer_s
    result = {
        "requests_per_s": round(sent / elapsed, 2),
        "p50_ms": round(1000 * statistics.median(latencies), 2),
        "p99_ms": round(1000 * percentile(latencies, 0.99), 2),
        "errors": errors,
        "requests": sent,
        "clients": args.clients,
        "batch": args.batch,
        "items_per_s": round(items_http, 1),
        "in_process_items_per_s": round(items_peer, 1),
        "in_process_errors": peer_errors,
        "ratio_vs_in_process": round(items_http / items_peer, 3),
        "cpu_count": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    print(f"rlvr serve: {sent} requests x {args.batch} items from {args.clients} clients in {elapsed:.2f}s, "
          f"{errors} errors")
    print(f"  HTTP:       {result['requests_per_s']} requests/s, {result['items_per_s']} items/s, "
          f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms")
    print(f"  in-process: {result['in_process_items_per_s']} items/s (same batches, same engine, no HTTP)")
    print(f"  ratio HTTP / in-process items/s: {result['ratio_vs_in_process']}")
    print("RESULT " + json.dumps({k: result[k] for k in ("requests_per_s", "p50_ms", "p99_ms", "errors")}
                                 | {k: v for k, v in result.items()
                                    if k not in ("requests_per_s", "p50_ms", "p99_ms", "errors")}))
    return result


if __name__ == "__main__":
    main()
