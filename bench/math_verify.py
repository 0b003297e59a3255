#!/usr/bin/env python
"""rlvr's MathVerifier against math-verify: throughput per CPU-second and accuracy.

Corpora (built once, scored by both systems in the same run):
- mathverify_speed: the 500 labelled pairs of ../shared/bench/mathverify_speed.py;
- gsm8k: GSM8K test references, with the dataset's own worked solution ending in a
  correct final answer (as `#### n`, `\\boxed{n}` or "The answer is n.") and the same
  solution ending in a wrong number;
- math500: MATH-500 references with the dataset's own solution (correct), and the
  solution of another problem whose answer has a different value (incorrect);
- cases: the project's labelled suite, tests/math_cases.jsonl (its task fields included);
- hard_equivalents: the cases of tests/test_math_hard_equivalents.py (#52), written beside the
  rules they test, so not a held-out measure: it shows the peer's verdicts on the same classes.

Throughput (pairs per CPU-second, the speedup) is measured on the first three, as before #52;
the last two are scored after them and only count for accuracy. Error rates with 95% Wilson
intervals (bench/rates.py) are printed per corpus and system: the false-positive rate over the
wrong answers, the false-negative rate over the correct ones, and in RESULT for the peer's suite
(mathverify_speed) and the project's corpus (cases, gsm8k and math500 together).

Each system runs in its own fresh process (sympy's caches would favour whichever ran
second). math-verify runs as people use it: `parse(completion)` and `parse("\\boxed{gold}")`
with its default configs, then `verify`. rlvr keeps each parsed reference, and the corpora
repeat references (a group of G completions shares one), so math-verify also runs, in its own
process, with each distinct reference parsed once (`mathverify_cached`): the speedup against
that peer is the headline, the one against plain calls is printed beside it.

CPU time counts everything: for rlvr, the calling process plus the CPU its worker processes
spent on the pairs (a pair that hits the 5 s limit is charged the whole 5 s, since its killed
worker's own count is lost; such pairs are counted and printed). Warm-up is excluded for both
and is the same: rlvr's pool start-up, whose worker zygote grades a few pairs (`_WARM_UP`) to
warm sympy before it forks, and, for math-verify, a first call and then the same pairs.
Ends with one RESULT line.

    python bench/math_verify.py                 # full run
    python bench/math_verify.py --gsm8k 100 --math500 100
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file is named like the package it measures: keep its folder off the import path so
# that `import math_verify` finds math-verify, not this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
_spec = importlib.util.spec_from_file_location("rates", Path(__file__).resolve().parent / "rates.py")
rates = importlib.util.module_from_spec(_spec)  # bench/rates.py, loaded without putting bench/ on the path
_spec.loader.exec_module(rates)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATASETS = SHARED / "datasets"
SYSTEMS = ("rlvr", "mathverify_cached", "mathverify")  # the peer with a reference cache like rlvr's, then plain
SPEED = ("mathverify_speed", "gsm8k", "math500")  # the corpora the throughput is measured on
PEER_SUITE = ("mathverify_speed",)
PROJECT_CORPUS = ("cases", "gsm8k", "math500")


# --- corpora ------------------------------------------------------------------------------


def corpus_mathverify_speed(n: int, seed: int) -> list[dict]:
    sys.path.insert(0, str(SHARED / "bench"))
    import mathverify_speed  # the peer benchmark's own pair generator

    return [{"completion": p.completion, "reference": p.gold, "label": bool(p.label)}
            for p in mathverify_speed.build_pairs(n, seed)]


def corpus_gsm8k(n: int, seed: int) -> list[dict]:
    rows = [json.loads(line) for line in (DATASETS / "gsm8k" / "test.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    rng.shuffle(rows)
    pairs = []
    for row in rows[:n]:
        body, _, final = row["answer"].rpartition("####")
        gold = final.strip().replace(",", "")
        value = int(gold) if re.fullmatch(r"-?\d+", gold) else None
        if value is None:
            continue
        body = re.sub(r"<<[^>]*>>", "", body).strip()  # the calculator annotations
        wrong = value + rng.choice([-10, -2, -1, 1, 2, 10, value or 3])
        for answer, label in ((gold, True), (str(wrong), False)):
            ending = rng.choice([f"#### {answer}", f"The answer is \\boxed{{{answer}}}.",
                                 f"So the answer is {answer}.", f"Therefore, the final answer is ${answer}$."])
            pairs.append({"completion": f"{body}\n{ending}", "reference": gold, "label": label})
    return pairs


def corpus_math500(n: int, seed: int) -> list[dict]:
    rows = [json.loads(line) for line in (DATASETS / "math500" / "test.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    rows = rows[:n]
    pairs = []
    for row in rows:
        pairs.append({"completion": row["solution"], "reference": row["answer"], "label": True})
        for _ in range(20):  # another problem's solution whose answer is clearly a different value
            other = rng.choice(rows)
            if _clearly_different(row["answer"], other["answer"]):
                pairs.append({"completion": other["solution"], "reference": row["answer"], "label": False})
                break
    return pairs


def corpus_cases() -> list[dict]:
    rows = [json.loads(line) for line in (ROOT / "tests" / "math_cases.jsonl").read_text().splitlines()]
    return [{"completion": r["completion"], "reference": r["reference"], "label": bool(r["expected"]),
             "fields": r.get("fields", {})} for r in rows]


def corpus_hard_equivalents() -> list[dict]:
    sys.path.insert(0, str(ROOT / "tests"))
    import test_math_hard_equivalents as hard

    return [{"completion": f"So the final answer is $\\boxed{{{a}}}$.", "reference": r, "label": label}
            for table, label in ((hard.ACCEPT, True), (hard.REJECT, False)) for pairs in table.values() for a, r in pairs]


def _clearly_different(a: str, b: str) -> bool:
    """Different digits and different letters: no chance of two spellings of one value."""
    def signature(s):
        s = re.sub(r"\\[a-zA-Z]+", "", s)
        return sorted(re.findall(r"\d", s)), sorted(re.findall(r"[a-zA-Z]", s))
    da, la = signature(a)
    db, lb = signature(b)
    return da != db and la == lb == []


# --- scoring (each system in its own process) ----------------------------------------------


def score_rlvr(corpora: dict[str, list[dict]]) -> dict:
    from rlvr.verifiers.math import MathVerifier
    from rlvr.verifiers.math.pool import get_pool

    verifier = MathVerifier(timeout=5.0)
    verifier.start()  # pool start-up and canary: not timed
    pool = get_pool()
    out = {}
    for name, pairs in corpora.items():
        cpu0, worker0, wall0, killed0 = time.process_time(), pool.cpu_seconds, time.perf_counter(), pool.replaced
        scores = verifier.score_batch([p["completion"] for p in pairs], [p["reference"] for p in pairs],
                                      [p.get("fields", {}) for p in pairs])
        cpu = time.process_time() - cpu0 + pool.cpu_seconds - worker0
        verdicts = [s.value == 1.0 for s in scores]
        out[name] = _summary(pairs, verdicts, cpu, time.perf_counter() - wall0)
        out[name]["timeouts"] = pool.replaced - killed0  # workers killed at the limit (or found dead)
    return out


def score_mathverify(corpora: dict[str, list[dict]], cache_gold: bool) -> dict:
    import logging

    from math_verify import parse, verify

    from rlvr.verifiers.math.worker import _WARM_UP  # what rlvr's workers run before they fork

    logging.disable(logging.WARNING)
    # Not timed: the first call, then the pairs rlvr's worker zygote warms sympy with before the
    # pool starts (lazy sympy imports and caches that the timed pairs would otherwise pay for).
    verify(parse("\\boxed{\\frac{1}{2}}"), parse("so $\\boxed{0.5}$"))
    for answer, reference in _WARM_UP:
        verify(parse("\\boxed{" + reference + "}"), parse(f"${answer}$"))
    out = {}
    for name, pairs in corpora.items():
        cpu0, wall0 = time.process_time(), time.perf_counter()
        verdicts, golds = [], {}
        for p in pairs:
            try:
                gold = golds.get(p["reference"]) if cache_gold else None
                if gold is None:
                    gold = parse("\\boxed{" + p["reference"] + "}")
                    if cache_gold:
                        golds[p["reference"]] = gold
                verdicts.append(bool(verify(gold, parse(p["completion"]))))
            except Exception:  # noqa: BLE001 - a crash on one pair counts as a rejection
                verdicts.append(False)
        out[name] = _summary(pairs, verdicts, time.process_time() - cpu0, time.perf_counter() - wall0)
    return out


def _summary(pairs, verdicts, cpu, wall) -> dict:
    correct = sum(v == p["label"] for p, v in zip(pairs, verdicts))
    false_pos = sum(v and not p["label"] for p, v in zip(pairs, verdicts))
    false_neg = sum(p["label"] and not v for p, v in zip(pairs, verdicts))
    positives = sum(p["label"] for p in pairs)
    return {"pairs": len(pairs), "cpu_s": cpu, "wall_s": wall, "correct": correct, "fp": false_pos, "fn": false_neg,
            "positives": positives, "negatives": len(pairs) - positives}


def _rates(results: dict, system: str, names) -> dict:
    """False-positive rate over the wrong answers and false-negative rate over the correct ones."""
    parts = [results[system][name] for name in names if name in results[system]]
    fp, neg = sum(p["fp"] for p in parts), sum(p["negatives"] for p in parts)
    fn, pos = sum(p["fn"] for p in parts), sum(p["positives"] for p in parts)
    return {"fp": rates.rate(fp, neg), "fn": rates.rate(fn, pos)}


def _interval(r: dict) -> str:
    return f"{r['errors']}/{r['n']} = {100 * r['rate']:.2f}% [{100 * r['low']:.2f}, {100 * r['high']:.2f}]"


def _in_fresh_process(system: str, corpus_file: str) -> dict:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", system, "--corpus", corpus_file],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{system} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speed-pairs", type=int, default=500)
    parser.add_argument("--gsm8k", type=int, default=300, help="GSM8K problems (two pairs each)")
    parser.add_argument("--math500", type=int, default=500, help="MATH-500 problems (two pairs each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        corpora = json.loads(Path(args.corpus).read_text())
        if args.worker == "rlvr":
            result = score_rlvr(corpora)
        else:
            result = score_mathverify(corpora, cache_gold=args.worker == "mathverify_cached")
        print(json.dumps(result))
        return

    corpora = {"mathverify_speed": corpus_mathverify_speed(args.speed_pairs, args.seed)}
    if (DATASETS / "gsm8k" / "test.jsonl").exists():
        corpora["gsm8k"] = corpus_gsm8k(args.gsm8k, args.seed)
    if (DATASETS / "math500" / "test.jsonl").exists():
        corpora["math500"] = corpus_math500(args.math500, args.seed)
    corpora["cases"] = corpus_cases()
    corpora["hard_equivalents"] = corpus_hard_equivalents()
    for name, pairs in corpora.items():
        print(f"corpus {name}: {len(pairs)} pairs ({sum(p['label'] for p in pairs)} correct)")

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(corpora, fh)
    try:
        results = {system: _in_fresh_process(system, fh.name) for system in SYSTEMS}
    finally:
        os.unlink(fh.name)

    print(f"\n{'corpus':<18}{'system':<30}{'pairs/cpu-s':>12}{'accuracy':>10}{'FP':>5}{'FN':>5}{'wall s':>8}")
    for name in corpora:
        for system in SYSTEMS:
            r = results[system][name]
            print(f"{name:<18}{system:<30}{r['pairs'] / max(r['cpu_s'], 1e-9):>12.1f}{r['correct'] / r['pairs']:>10.4f}"
                  f"{r['fp']:>5}{r['fn']:>5}{r['wall_s']:>8.2f}")
        for peer in SYSTEMS[1:]:
            ratio = results[peer][name]["cpu_s"] / max(results["rlvr"][name]["cpu_s"], 1e-9)
            print(f"{name:<18}{'speedup vs ' + peer:<30}{ratio:>12.1f}")

    print(f"\n{'corpus':<18}{'system':<20}{'false positives (95% interval)':>38}{'false negatives (95% interval)':>38}")
    for name in corpora:
        for system in SYSTEMS:
            r = _rates(results, system, (name,))
            print(f"{name:<18}{system:<20}{_interval(r['fp']):>38}{_interval(r['fn']):>38}")

    def total(system, key):
        return sum(results[system][name][key] for name in SPEED if name in corpora)

    n = total("rlvr", "pairs")  # the throughput corpora
    rate = {system: n / total(system, "cpu_s") for system in SYSTEMS}
    summary = {
        "rlvr_pairs_per_cpu_s": round(rate["rlvr"], 1),
        "mathverify_cached_pairs_per_cpu_s": round(rate["mathverify_cached"], 1),
        "mathverify_pairs_per_cpu_s": round(rate["mathverify"], 1),
        "speedup": round(rate["rlvr"] / rate["mathverify_cached"], 2),  # the headline: like for like
        "speedup_vs_plain": round(rate["rlvr"] / rate["mathverify"], 2),
        "rlvr_accuracy": round(total("rlvr", "correct") / n, 4),
        "mathverify_accuracy": round(total("mathverify_cached", "correct") / n, 4),
        "mathverify_plain_accuracy": round(total("mathverify", "correct") / n, 4),
        "rlvr_timeouts": total("rlvr", "timeouts"),
        "rates": {suite: {system: _rates(results, system, names) for system in ("rlvr", "mathverify_cached")}
                  for suite, names in (("peer_suite", PEER_SUITE), ("project_corpus", PROJECT_CORPUS),
                                       ("hard_equivalents", ("hard_equivalents",)))},
    }
    print(f"\nall corpora: {n} pairs; rlvr {summary['rlvr_pairs_per_cpu_s']} vs math-verify "
          f"{summary['mathverify_cached_pairs_per_cpu_s']} pairs per CPU-second with each reference parsed once "
          f"(speedup {summary['speedup']}), {summary['mathverify_pairs_per_cpu_s']} parsing it every time "
          f"({summary['speedup_vs_plain']}); rlvr timed out on {summary['rlvr_timeouts']} (each charged 5 CPU-seconds)")
    for suite, by_system in summary["rates"].items():
        for system, r in by_system.items():
            print(f"{suite} {system}: false positives {_interval(r['fp'])}, false negatives {_interval(r['fn'])}")
    print("RESULT " + json.dumps(summary))


if __name__ == "__main__":
    main()
