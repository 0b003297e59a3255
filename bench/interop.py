#!/usr/bin/env python
"""Per-step latency and episodes/s of one rlvr env used four ways, in one run, on the same episodes.

The env is `rlvr/Arithmetic-v0` (two-digit sums: one reset and one scored step per episode). Episode k
is reset with seed k and answered with its reference (even k) or a wrong number (odd k), so every
reward is checked: a wrong reward, an `error` episode or an exception counts in `errors`.

- `inprocess`: `gymnasium.make` in this process (the peer: what every other row adds to).
- `openenv`: the env served by `rlvr serve-env` (openenv-core's server, another process) and played by
  rlvr/OpenEnv-v0 (OpenEnv's WebSocket client) over loopback, one session.
- `openenv_32_sessions`: 32 such sessions at once, one thread each (the latency of each step, and
  episodes/s of all sessions together).
- `verifiers`: the verifiers adapter's scoring of a reply (`rlvr.integrations.verifiers_env.score_reply`:
  the reset and the composite score that its `rlvr` reward returns); the row is left out, and says
  so, where the adapter is not installed.

A step is `env.step(answer)` (for `verifiers`, one `score_reply`, its unit of work); an episode is the
reset and the step. `openenv_overhead_ms_p50` is the OpenEnv p50 step minus the in-process one
(target: under 5 ms on loopback, with no errors at 32 sessions).

    python bench/interop.py [--episodes 200] [--sessions 32] [--episodes-per-session 20]

Ends with `RESULT {"inprocess_step_ms_p50": ..., "openenv_step_ms_p50": ...,
"openenv_step_ms_p99_32_sessions": ..., "errors": 0, ...}`, and exits 1 if any reward was wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

ENV_ID = "rlvr/Arithmetic-v0"
ENV_KWARGS = {"digits": 2, "ops": "+"}
WARMUP = 20  # untimed episodes before each row (the verifier's first call, a session's start)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def golds(n: int) -> list[str]:
    import gymnasium as gym

    env = gym.make(ENV_ID, **ENV_KWARGS)
    out = []
    for k in range(n):
        env.reset(seed=k)
        out.append(env.unwrapped.task.reference)
    env.close()
    return out


def answer(k: int, gold: str) -> tuple[str, float]:
    """The reply to episode k and the reward it must get."""
    return (f"\\boxed{{{gold}}}", 1.0) if k % 2 == 0 else (f"\\boxed{{{int(gold) + 1}}}", 0.0)


def play(env, episodes: range, gold: list[str], steps: list[float]) -> int:
    """Run `episodes` on `env`, appending each step's milliseconds; returns the errors."""
    errors = 0
    for k in episodes:
        try:
            env.reset(seed=k)
            text, expected = answer(k, gold[k])
            start = time.perf_counter()
            _, reward, _, _, info = env.step(text)
            steps.append((time.perf_counter() - start) * 1000)
            errors += reward != expected or info["score"]["reason"] == "error"
        except Exception as exc:  # noqa: BLE001  (counted, and the run goes on)
            print(f"  error in episode {k}: {type(exc).__name__}: {exc}", file=sys.stderr)
            errors += 1
    return errors


def row(steps: list[float], episodes: int, seconds: float) -> dict:
    return {"step_ms_p50": round(statistics.median(steps), 3), "step_ms_p99": round(percentile(steps, 0.99), 3),
            "episodes_per_s": round(episodes / seconds, 1)}


def serve() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", "serve-env", ENV_ID, "--port", "0", "--env-kwargs",
                             json.dumps(ENV_KWARGS)], stdout=subprocess.PIPE,
                            # openenv-core 0.3.0 logs a WebSocketDisconnect traceback for every session a client
                            # closes (its handler closes the socket again); every reward is checked here instead
                            stderr=subprocess.DEVNULL)
    match = re.search(r"on (http://\S+)", proc.stdout.readline().decode())
    if not match:
        proc.kill()
        raise SystemExit("rlvr serve-env did not start")
    return proc, match.group(1)


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=200, help="episodes of the one-at-a-time rows")
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--episodes-per-session", type=int, default=20)
    args = parser.parse_args()
    # bench/ is first on sys.path when this runs as a script, and bench/math_verify.py would shadow the package
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]

    import gymnasium as gym

    import rlvr.envs  # noqa: F401

    total = max(WARMUP, args.episodes, args.sessions * args.episodes_per_session)
    gold = golds(total)
    rows, errors = {}, {}

    env = gym.make(ENV_ID, **ENV_KWARGS)
    play(env, range(WARMUP), gold, [])  # warm-up: the verifier's first call
    steps: list[float] = []
    start = time.perf_counter()
    errors["inprocess"] = play(env, range(args.episodes), gold, steps)
    rows["inprocess"] = row(steps, args.episodes, time.perf_counter() - start)
    env.close()

    proc, url = serve()
    try:
        client = gym.make("rlvr/OpenEnv-v0", url=url)
        play(client, range(WARMUP), gold, [])
        steps = []
        start = time.perf_counter()
        errors["openenv"] = play(client, range(args.episodes), gold, steps)
        rows["openenv"] = row(steps, args.episodes, time.perf_counter() - start)
        client.close()

        clients = [gym.make("rlvr/OpenEnv-v0", url=url) for _ in range(args.sessions)]
        per_session: list[list[float]] = [[] for _ in clients]
        failed = [0] * len(clients)

        def session(i: int) -> None:
            first = i * args.episodes_per_session
            failed[i] = play(clients[i], range(first, first + args.episodes_per_session), gold, per_session[i])

        threads = [threading.Thread(target=session, args=(i,)) for i in range(len(clients))]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        errors[f"openenv_{args.sessions}_sessions"] = sum(failed)
        rows[f"openenv_{args.sessions}_sessions"] = row([s for ss in per_session for s in ss],
                                                        args.sessions * args.episodes_per_session, seconds)
        for c in clients:
            c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)

    try:
        from rlvr.integrations.verifiers_env import score_reply
    except ImportError as exc:
        print(f"verifiers row missing: the adapter does not import here ({exc})")
    else:
        def scored(k: int) -> tuple[float, str | None]:
            s = score_reply(ENV_ID, ENV_KWARGS, k, answer(k, gold[k])[0])
            return s.value, s.reason

        for k in range(WARMUP):
            scored(k)
        steps, bad = [], 0
        start = time.perf_counter()
        for k in range(args.episodes):
            t0 = time.perf_counter()
            value, reason = scored(k)
            steps.append((time.perf_counter() - t0) * 1000)
            bad += value != answer(k, gold[k])[1] or reason == "error"
        errors["verifiers"] = bad
        rows["verifiers"] = row(steps, args.episodes, time.perf_counter() - start)

    result = {f"{name}_{key}" if not name.startswith("openenv_") else f"openenv_{key}_{name[8:]}": value
              for name, r in rows.items() for key, value in r.items()}
    result.update(openenv_overhead_ms_p50=round(rows["openenv"]["step_ms_p50"] - rows["inprocess"]["step_ms_p50"], 3),
                  errors=sum(errors.values()), errors_by_row=errors, env=ENV_ID, episodes=args.episodes,
                  sessions=args.sessions, cpu_count=os.cpu_count(), loadavg_1m=round(os.getloadavg()[0], 2))
    for name, r in rows.items():
        print(f"{name:<22} step p50 {r['step_ms_p50']:8.3f} ms  p99 {r['step_ms_p99']:8.3f} ms  "
              f"{r['episodes_per_s']:8.1f} episodes/s  {errors[name]} errors")
    print(f"OpenEnv overhead per step (p50, loopback, 1 session): {result['openenv_overhead_ms_p50']} ms "
          f"(target < 5 ms); ratio of episodes/s in-process / OpenEnv: "
          f"{rows['inprocess']['episodes_per_s'] / rows['openenv']['episodes_per_s']:.1f}")
    print("RESULT " + json.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(1 if main()["errors"] else 0)
