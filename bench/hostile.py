#!/usr/bin/env python
"""Latency of every verifier under hostile input: does each check end by its deadline?

Hostile inputs, per verifier:
  math     exponent towers, nesting a thousand deep, a 1 MB completion, ten thousand boxes,
           `\\sin(10^{100}\\pi)`, and a worker killed mid-check (an infrastructure failure);
  code     sleeps, a fork bomb, output floods, programs that close their pipes (stdout, stderr,
           stdin, or every descriptor), through the real Docker sandbox;
  ifeval   1 MB texts against each of the 25 instruction types, strict and loose, and texts just
           under the verifier's length cap (the most that is still checked);
  judge    servers on 127.0.0.1 that accept and never answer, that drip-feed the headers or the
           body a byte at a time, that hang up, or that answer garbage (started here, each one
           bounded and stopped by the bench).
Each verifier is timed one call at a time (every case, `--repeat` times), then in a burst of
`--burst` calls (the cases in turn) from as many threads as its pool has workers (IFEval has no
pool: one thread). Latency is one `score()` call, as a caller sees it; caches of earlier verdicts
(math, language detection) are cleared before each call so that every call does the whole work. Targets: every latency at most the verifier's configured
timeout + 1 s (IFEval has no timeout: its limit is 0 + 1 s), no result lost (a call that raises,
returns no Score, or runs past its timeout + 30 s), no infrastructure failure scored as anything
but `error`, no hostile input scored above 0, and every pool answering a normal request right
after its burst.

The peer of this bench is the deadline itself: each row prints max latency / limit.

    python bench/hostile.py [--burst 1000] [--repeat 3] [--only math,code,ifeval,judge]

Ends with `RESULT {"max_over_timeout_s", "lost", "misscored", "recovered", "verifiers": {...}}`,
`max_over_timeout_s` being the worst latency minus its timeout over all verifiers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

SLACK = 1.0  # the target: max latency <= timeout + SLACK
LOST_AFTER = 30.0  # a call still running this long after its limit counts as lost


# --- hostile servers (loopback only, bounded, self-stopping) ---------------------------------


class HostileServer:
    """A TCP server on 127.0.0.1 that misbehaves as an OpenAI-compatible endpoint.

    Modes: "silent" (accepts, reads the request, never answers), "drip_headers" (sends a valid
    response a byte every `interval` seconds, from the status line on), "drip_body" (headers at
    once, then the body a byte at a time), "hangup" (closes the connection unanswered),
    "garbage" (a 200 whose body is not a chat completion) and "judge" (a well-behaved judge that
    gives the maximum score under the request's nonce: the normal request after a burst).
    It stops by itself after `lifetime` seconds, and on `close()`; every connection it holds is
    closed then.
    """

    MODES = ("silent", "drip_headers", "drip_body", "hangup", "garbage", "judge")

    def __init__(self, mode: str, interval: float = 0.2, lifetime: float = 900.0):
        if mode not in self.MODES:
            raise ValueError(f"mode must be one of {self.MODES}")
        self.mode = mode
        self.interval = interval
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._timer.cancel()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            _quiet_close(conn)
        _quiet_close(self._listener)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                if self._stop.is_set():
                    _quiet_close(conn)
                    return
                self._conns.add(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            request = _read_request(conn, self._stop)
            if request is None or self.mode == "hangup":
                return
            if self.mode == "silent":
                while not self._stop.wait(0.5):
                    pass
                return
            if self.mode == "garbage":
                conn.sendall(_response(b"this is not json"))
                return
            nonce = re.search(rb"SCORE_([0-9a-f]{8})", request)
            body = json.dumps({"choices": [{"message": {"role": "assistant", "content": json.dumps(
                {f"SCORE_{nonce.group(1).decode() if nonce else 'x'}": 10})}}]}).encode()
            reply = _response(body)
            if self.mode == "judge":
                conn.sendall(reply)
                return
            head = reply.index(b"\r\n\r\n") + 4 if self.mode == "drip_body" else 0
            conn.sendall(reply[:head])
            for i in range(head, len(reply)):
                if self._stop.wait(self.interval):
                    return
                conn.sendall(reply[i:i + 1])
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(conn)
            _quiet_close(conn)


def _read_request(conn: socket.socket, stop: threading.Event) -> bytes | None:
    """The whole HTTP request (headers and Content-Length body), or None when the client left."""
    conn.settimeout(0.5)
    data = b""
    while not stop.is_set():
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            length = re.search(rb"(?i)content-length:\s*(\d+)", data[:head_end])
            if len(data) >= head_end + 4 + (int(length.group(1)) if length else 0):
                return data
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return None
        data += chunk
    return None


def _response(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)


def _quiet_close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


# --- cases ---------------------------------------------------------------------------------


@dataclass
class Case:
    """One hostile input. `infra`: an infrastructure failure, which must score `error`; otherwise
    the input is the model's and must score 0 (any reason but `error`), or `ok` when it is right."""

    name: str
    completion: Any
    reference: Any = None
    fields: dict = field(default_factory=dict)
    infra: bool = False
    correct: bool = False  # the expected value is 1 (the recovery request)
    any_value: bool = False  # a legitimate text (IFEval): any verdict but `error` is right
    before: Any = None  # called right before scoring (to break the infrastructure)


def math_cases(verifier) -> list[Case]:
    tower = "2^{" * 40 + "2" + "}" * 40
    nest = "(" * 999 + "1" + ")" * 999
    cases = [
        Case("tower", f"\\boxed{{{tower}}}", "4"),
        Case("tower_10", "\\boxed{10^{10^{10^{10^{100}}}}}", "10^{10^{10^{10^{101}}}}"),
        Case("nest_999", f"\\boxed{{{nest}}}", "1"),
        Case("nest_1000_braces", "\\boxed{" + "{" * 1000 + "1" + "}" * 1000 + "}", "1"),
        Case("nest_1000_outside", "(" * 1000 + "\\boxed{2}" + ")" * 1000, "1"),
        Case("frac_nest_1000", "\\boxed{" + "\\frac{1}{" * 1000 + "2" + "}" * 1000 + "}", "1"),
        Case("one_mb", "x " * 500_000 + "\\boxed{3}", "4"),
        Case("one_mb_math", "$1+" * 250_000 + "$", "3"),
        Case("one_mb_open_brace", "\\boxed{" * 100_000 + "1", "1"),
        Case("boxes_10k_same", "\\boxed{1} " * 10_000, "2"),
        Case("boxes_10k_distinct", "".join(f"\\boxed{{{i}}} " for i in range(10_000)), "1"),
        Case("sin_huge", "\\boxed{\\sin(10^{100}\\pi)}", "1"),
        Case("factorial", "\\boxed{(10^{6})!}", "1"),
        Case("e_tower", "\\boxed{e^{e^{e^{x}}}+\\ln(\\ln(\\ln(x)))}", "x"),
    ]
    cases.append(Case("worker_killed", "\\boxed{e^{e^{e^{y}}}+\\ln(\\ln(\\ln(y)))}", "y", infra=True,
                      before=lambda: _kill_math_workers(verifier)))
    return cases


def _kill_math_workers(verifier) -> None:
    """An infrastructure failure: SIGKILL every worker of the pool shortly after the check starts."""
    from rlvr.verifiers.math.pool import get_pool

    def kill():
        time.sleep(0.05)
        for worker in list(get_pool(verifier.workers)._all):
            try:
                os.kill(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    threading.Thread(target=kill, daemon=True).start()


def code_cases() -> list[Case]:
    tests = {"test_list": ["assert f(1) == 1", "assert f(2) == 2"]}
    programs = {
        "sleep": "import time\ntime.sleep(1000)\ndef f(x):\n    return x\n",
        "sleep_in_call": "import time\ndef f(x):\n    time.sleep(1000)\n    return x\n",
        "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        "flood_stdout": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
        "flood_stderr": "import os\nwhile True:\n    os.write(2, b'y' * 65536)\n",
        "close_stdout": "import os\nos.close(1)\ndef f(x):\n    return x + 1\n",
        "close_stderr": "import os\nos.close(2)\ndef f(x):\n    raise ValueError(x)\n",
        "close_stdin": "import os\nos.close(0)\ndef f(x):\n    return input()\n",
        "close_every_fd": "import os\nos.closerange(0, 1024)\nimport time\ntime.sleep(1000)\n",
        "close_all_then_exit": "import os\nos.closerange(0, 1024)\nos._exit(0)\n",
        "daemon_holds_pipes": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\n"
                               "def f(x):\n    return x - 1\n"),
    }
    return [Case(name, f"```python\n{code}```", None, tests) for name, code in programs.items()]


def ifeval_cases() -> list[Case]:
    from rlvr.verifiers.instructions import INSTRUCTION_IDS, MAX_CHARS

    texts = {
        "prose_1mb": ("The quick brown fox jumps over the lazy dog. " * 23_000)[:1_000_000],
        "bullets_1mb": "* a\n" * 250_000,
        "braces_1mb": "{" * 500_000 + "}" * 500_000,
        "one_word_1mb": "x" * 1_000_000,
        # just under the length cap: the most text that is still checked
        "prose_cap": ("The quick brown fox jumps over the lazy dog. " * 23_000)[:MAX_CHARS],
        "bullets_cap": ("* a\n" * 250_000)[:MAX_CHARS],
    }
    args = _instruction_arguments()
    return [Case(f"{text}:{iid}", body, [{"id": iid, "kwargs": args.get(iid, {})}], any_value=True)
            for text, body in texts.items() for iid in INSTRUCTION_IDS]


def _instruction_arguments() -> dict[str, dict]:
    return {
        "keywords:existence": {"keywords": ["zebra"]},
        "keywords:frequency": {"keyword": "fox", "frequency": 3, "relation": "less than"},
        "keywords:forbidden_words": {"forbidden_words": ["dog", "x", "a"]},
        "keywords:letter_frequency": {"letter": "q", "let_frequency": 2, "let_relation": "less than"},
        "language:response_language": {"language": "fr"},
        "length_constraints:number_sentences": {"num_sentences": 3, "relation": "less than"},
        "length_constraints:number_paragraphs": {"num_paragraphs": 3},
        "length_constraints:number_words": {"num_words": 10, "relation": "less than"},
        "length_constraints:nth_paragraph_first_word": {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "zebra"},
        "detectable_content:number_placeholders": {"num_placeholders": 3},
        "detectable_content:postscript": {"postscript_marker": "P.S."},
        "detectable_format:number_bullet_lists": {"num_bullets": 3},
        "detectable_format:number_highlighted_sections": {"num_highlights": 3},
        "detectable_format:multiple_sections": {"section_spliter": "Section", "num_sections": 3},
        "combination:repeat_prompt": {"prompt_to_repeat": "Say zebra."},
        "startend:end_checker": {"end_phrase": "Is there anything else?"},
        "change_case:capital_word_frequency": {"capital_frequency": 3, "capital_relation": "at least"},
    }


JUDGE_MODES = ("silent", "drip_headers", "drip_body", "hangup", "garbage")


def judge_cases(servers: dict[str, HostileServer]) -> list[Case]:
    return [Case(mode, f"The answer is 4 ({mode}).", "4", {"question": "2+2?", "_url": servers[mode].url},
                 infra=True) for mode in JUDGE_MODES]


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list = field(default_factory=list)
    lost: int = 0
    misscored: int = 0
    errors: int = 0  # `error` on a model's input (counted, not a miss of the targets)
    notes: list = field(default_factory=list)

    def add(self, case: Case, seconds: float | None, score: Any) -> None:
        from rlvr.verifiers.core import ERROR, Score

        if seconds is None or not isinstance(score, Score):
            self.lost += 1
            self.notes.append(f"lost {case.name}: {score!r:.200}")
            return
        self.latencies.append((seconds, case.name))
        if case.infra:
            bad = score.reason != ERROR
        elif case.correct:
            bad = score.value != 1.0
        else:
            bad = score.value > 0 and not case.any_value
            self.errors += score.reason == ERROR
            if score.reason == ERROR and len(self.notes) < 20:
                why = {k: str(v)[:160] for k, v in score.info.items() if k in ("why", "error", "status")}
                self.notes.append(f"error on the model's input {case.name}: {why}")
        if bad:
            self.misscored += 1
            if len(self.notes) < 20:
                self.notes.append(f"misscored {case.name}: value {score.value} reason {score.reason} "
                                  f"info {str(score.info)[:160]}")


def score_once(verifier_for, case: Case, limit: float, executor: ThreadPoolExecutor) -> tuple[float | None, Any]:
    """One timed `score()` call, run on `executor` so that a call that never ends is counted lost."""
    def call():
        if case.before:
            case.before()
        started = time.monotonic()
        try:
            score = verifier_for(case).score(case.completion, case.reference, **case.fields)
        except Exception as exc:  # noqa: BLE001 - a verifier that raises has lost the result
            return None, exc
        return time.monotonic() - started, score

    future = executor.submit(call)
    try:
        return future.result(timeout=limit + LOST_AFTER)
    except TimeoutError:
        return None, "still running"


def summary(latencies: list, limit: float) -> dict:
    values = sorted(s for s, _ in latencies)
    if not values:
        return {}
    worst = max(latencies)
    p99 = values[min(len(values) - 1, int(round(0.99 * (len(values) - 1))))]
    return {"n": len(values), "p50_s": round(statistics.median(values), 3), "p99_s": round(p99, 3),
            "max_s": round(worst[0], 3), "max_case": worst[1], "max_over_timeout_s": round(worst[0] - limit, 3)}


def run_verifier(name: str, verifier_for, cases: list[Case], normal: Case, limit: float, size: int,
                 burst: int, repeat: int) -> dict:
    """The one-at-a-time pass, the burst, and a normal request right after each."""
    one, many = Tally(), Tally()
    with ThreadPoolExecutor(max_workers=1) as single:
        for _ in range(repeat):
            for case in cases:
                one.add(case, *score_once(verifier_for, case, limit, single))
        recovered_single = _recovered(verifier_for, normal, limit, single)
    print(f"{name}: one at a time {summary(one.latencies, limit)}", flush=True)
    plain = [case for case in cases if case.before is None]  # breaking the pool mid-burst would hit the others
    burst_cases = (plain * (burst // len(plain) + 1))[:burst]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=size) as callers, ThreadPoolExecutor(max_workers=size) as pool:
        outcomes = list(callers.map(lambda c: score_once(verifier_for, c, limit, pool), burst_cases))
    wall = time.monotonic() - started
    for case, outcome in zip(burst_cases, outcomes):
        many.add(case, *outcome)
    with ThreadPoolExecutor(max_workers=1) as single:
        recovered = recovered_single and _recovered(verifier_for, normal, limit, single)
    print(f"{name}: burst of {len(burst_cases)} at {size} in {wall:.0f} s {summary(many.latencies, limit)}; "
          f"recovered {recovered}", flush=True)
    return {"one": one, "burst": many, "recovered": recovered, "burst_wall_s": round(wall, 1)}


def _recovered(verifier_for, normal: Case, limit: float, executor: ThreadPoolExecutor) -> bool:
    """Whether a normal request right after is answered right, within its limit + SLACK."""
    seconds, score = score_once(verifier_for, normal, limit, executor)
    ok = seconds is not None and getattr(score, "value", None) == 1.0 and seconds <= limit + SLACK
    if not ok:
        print(f"  not recovered: {normal.name} took {seconds} s and gave {score!r:.300}")
    return ok


def bench_math(args) -> dict:
    from rlvr.verifiers import math as math_module
    from rlvr.verifiers.math import MathVerifier
    from rlvr.verifiers.math.pool import get_pool

    verifier = MathVerifier(timeout=args.math_timeout)
    verifier.start()

    def uncached(case):  # every call does the whole work: no verdict is reused from an earlier call
        with math_module._cache_lock:
            math_module._cache.clear()
        return verifier

    normal = Case("normal", "<think>8 = 4 * 2</think> So $\\boxed{2\\sqrt{2}}$.", "\\sqrt{8}", correct=True)
    return run_verifier("math", uncached, math_cases(verifier), normal, verifier.timeout,
                        get_pool(verifier.workers).size, args.burst, args.repeat)


def bench_code(args) -> dict:
    from rlvr.sandbox.pool import get_pool
    from rlvr.verifiers.code import CodeVerifier

    verifier = CodeVerifier(mode="all", timeout=args.code_timeout)
    pool = get_pool(verifier.backend, verifier.pool_size, verifier.image, verifier.limits)
    normal = Case("normal", "```python\ndef f(x):\n    return x\n```", None,
                  {"test_list": ["assert f(1) == 1", "assert f(2) == 2"]}, correct=True)
    return run_verifier("code", lambda case: verifier, code_cases(), normal, verifier.timeout, pool.size,
                        args.burst if args.code_burst is None else args.code_burst, args.repeat)


def bench_ifeval(args) -> dict:
    from rlvr.verifiers.instructions import InstructionVerifier

    verifiers = {"strict": InstructionVerifier(), "loose": InstructionVerifier(mode="loose")}
    verifiers["strict"].start()  # language profiles loaded once per process, like a pool's start-up
    cases = [Case(f"{mode}:{c.name}", c.completion, c.reference, {"_mode": mode}, any_value=True)
             for c in ifeval_cases() for mode in verifiers]
    normal = Case("normal", "no commas here", [{"id": "punctuation:no_comma", "kwargs": {}}],
                  {"_mode": "loose"}, correct=True)

    from rlvr.verifiers.instructions.checks import detect_language

    class ByMode:  # the case names its mode; `score()` sees no private field
        def __init__(self, mode):
            self.verifier = verifiers[mode]
            detect_language.cache_clear()  # no language detected in an earlier call is reused

        def score(self, completion, reference, **fields):
            fields.pop("_mode")
            return self.verifier.score(completion, reference, **fields)

    # No pool: the checks run in the caller's thread, pure Python under the GIL, so the burst is one
    # caller (more threads only queue on the GIL and stretch every call).
    return run_verifier("ifeval", lambda case: ByMode(case.fields["_mode"]), cases, normal, 0.0,
                        1, args.burst, args.repeat)


def bench_judge(args) -> dict:
    from rlvr.verifiers.judge import JudgeVerifier

    servers = {mode: HostileServer(mode, lifetime=args.server_lifetime) for mode in (*JUDGE_MODES, "judge")}
    try:
        judges = {mode: JudgeVerifier(server.url, "hostile", timeout=args.judge_timeout, retries=2,
                                      backoff=0.1, cache_dir=False, max_concurrency=args.judge_concurrency)
                  for mode, server in servers.items()}

        class ByServer:
            def __init__(self, url):
                self.judge = next(j for m, j in judges.items() if servers[m].url == url)

            def score(self, completion, reference, **fields):
                fields.pop("_url")
                return self.judge.score(completion, reference, **fields)

        normal = Case("normal", "The answer is 4.", "4", {"question": "2+2?", "_url": servers["judge"].url},
                      correct=True)
        return run_verifier("judge", lambda case: ByServer(case.fields["_url"]), judge_cases(servers), normal,
                            args.judge_timeout, args.judge_concurrency, args.burst, args.repeat)
    finally:
        for server in servers.values():
            server.close()


BENCHES = {"math": bench_math, "code": bench_code, "ifeval": bench_ifeval, "judge": bench_judge}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=1000, help="calls in each verifier's burst")
    parser.add_argument("--repeat", type=int, default=3, help="one-at-a-time passes over the cases")
    parser.add_argument("--code-burst", type=int, default=None,
                        help="calls in the code burst (default --burst): nearly every hostile job retires its "
                             "container, so the burst runs at the rate containers start")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated: " + ",".join(BENCHES))
    parser.add_argument("--math-timeout", type=float, default=1.0)
    parser.add_argument("--code-timeout", type=float, default=2.0)
    parser.add_argument("--judge-timeout", type=float, default=2.0)
    parser.add_argument("--judge-concurrency", type=int, default=8)
    parser.add_argument("--server-lifetime", type=float, default=1800.0, help="hostile servers stop after this")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in BENCHES]
    if unknown:
        parser.error(f"unknown verifier(s): {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    limits = {"math": args.math_timeout, "code": args.code_timeout, "ifeval": 0.0, "judge": args.judge_timeout}
    rows, load = {}, [os.getloadavg()[0]]
    for name in chosen:
        outcome = BENCHES[name](args)
        load.append(os.getloadavg()[0])
        row = {"timeout_s": limits[name], "recovered": outcome["recovered"], "burst_wall_s": outcome["burst_wall_s"],
               "loadavg_1m_after": round(os.getloadavg()[0], 2)}
        for phase in ("one", "burst"):
            tally = outcome[phase]
            row[phase] = {**summary(tally.latencies, limits[name]), "lost": tally.lost,
                          "misscored": tally.misscored, "errors_on_model_input": tally.errors}
            for note in tally.notes[:10]:
                print(f"  {name} {phase}: {note}")
        rows[name] = row
    overs = [row[phase]["max_over_timeout_s"] for row in rows.values() for phase in ("one", "burst")
             if "max_over_timeout_s" in row[phase]]
    result = {
        "max_over_timeout_s": max(overs) if overs else None,
        "lost": sum(row[p]["lost"] for row in rows.values() for p in ("one", "burst")),
        "misscored": sum(row[p]["misscored"] for row in rows.values() for p in ("one", "burst")),
        "recovered": all(row["recovered"] for row in rows.values()),
        "verifiers": rows,
        "burst": args.burst,
        "code_burst": args.burst if args.code_burst is None else args.code_burst,
        "loadavg_1m": [round(x, 2) for x in load],
        "cpus": os.cpu_count(),
    }
    for name, row in rows.items():
        for phase in ("one", "burst"):
            r = row[phase]
            if r.get("n"):
                print(f"{name:7s} {phase:5s} n={r['n']:5d} p50 {r['p50_s']:.3f} s  p99 {r['p99_s']:.3f} s  "
                      f"max {r['max_s']:.3f} s ({r['max_case']}; limit {row['timeout_s']} + {SLACK} s, "
                      f"max/limit+1 = {r['max_s'] / (row['timeout_s'] + SLACK):.2f})  lost {r['lost']}  "
                      f"misscored {r['misscored']}")
    print(f"load average (1 min) before and after each verifier: {result['loadavg_1m']} on {os.cpu_count()} CPUs "
          "(a shared machine: latencies follow the load)")
    print("RESULT " + json.dumps(result))
    return result


if __name__ == "__main__":
    main()
