"""Code verdicts against the official protocols: rlvr's sandbox and the reference run agree.

Programs: every HumanEval canonical solution and MBPP reference solution in ../shared/datasets,
a harmless variant of each (reformatted, dead code added, or an equality written the other way
round) and mutants made here by one AST edit inside the solution's functions: a flipped comparison,
an integer constant off by one, a deleted statement, a swapped operator, a return of None, or a
wrapper that makes the function under test raise on its third call (a check that calls it outside
an assert, as HumanEval/32's does, must still fail).

Each program is scored two ways:
  rlvr      `CodeVerifier(mode="all")` in the warm Docker pool, with the task fields that
            `rlvr/HumanEval-v0` and `rlvr/MBPP-v0` build (prompt as trusted prefix, entry_point).
  official  HumanEval: prompt + completion + "\\n" + test + "\\n" + check(entry_point); MBPP: code +
            test_setup_code + the asserts (the setup builds its trees from the solution's own
            `Node` class, so it follows the code); passed when `python3` exits 0 within the time
            limit. Each program runs in a fresh `python3 -I` process, inside one locked-down
            container of the sandbox image (same CPython as the pool; no network, read-only root,
            unprivileged user, each process capped at 2 GiB of address space), since mutants can
            loop or allocate without bound.

Both sides get the same timeout. A disagreement is rerun once on both sides with three times
the timeout, to tell timing under load (flaky) from a verdict that differs; the count is
reported either way. RESULT: programs, agreement (first run), disagreements, interval (95%,
bench/rates.py), per dataset, false_positive (rlvr passes, official fails, out of the programs the
official run fails) and false_negative (the reverse, out of those it passes), each with its 95%
interval, and the disagreeing programs (each printed with both verdicts and the rerun).

Usage: nice -n 10 python bench/code_verdicts.py [--quick | --limit N] [--mutants 2] [--timeout 10] [--seed 0]
                                                [--datasets humaneval,mbpp] [--workers 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rates import rate  # noqa: E402

from rlvr.envs.datasets import HumanEvalTasks, MBPPTasks  # noqa: E402
from rlvr.sandbox.image import image_tag  # noqa: E402
from rlvr.sandbox.pool import get_pool  # noqa: E402
from rlvr.verifiers.code import CodeVerifier  # noqa: E402

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
OFFICIAL_MEMORY = 2 << 30  # address space of one official run

# -- mutants ------------------------------------------------------------------------------

FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
        ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
        ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
        ast.BitXor: ast.BitOr, ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.MatMult: ast.Mult}


def _sites(func: ast.AST) -> list[tuple[str, int]]:
    """Every (operator, occurrence) one edit could change inside a function (the raising wrapper aside)."""
    found = {"flip_comparison": 0, "off_by_one": 0, "delete_statement": 0, "swap_operator": 0, "return_none": 0}
    for node in ast.walk(func):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in FLIP:
            found["flip_comparison"] += 1
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            found["off_by_one"] += 1
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in SWAP:
            found["swap_operator"] += 1
        elif isinstance(node, ast.BoolOp):
            found["swap_operator"] += 1
        elif isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            found["return_none"] += 1
        for body in _bodies(node):
            found["delete_statement"] += len(_deletable(body))
    return [(op, i) for op, n in found.items() for i in range(n)]


def _is_none(node):
    return isinstance(node, ast.Constant) and node.value is None


def _bodies(node):
    return [getattr(node, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(node, f, None), list)]


def _deletable(body):
    """Statements whose removal leaves a block: not the only one, not a docstring or a def."""
    if len(body) < 2:
        return []
    return [s for i, s in enumerate(body) if not isinstance(s, (ast.FunctionDef, ast.ClassDef))
            and not (i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]


def mutate(func: ast.AST, op: str, index: int, rng: random.Random) -> ast.AST:
    """A copy of `func` with the index-th site of `op` changed (same walk order as `_sites`)."""
    func = copy.deepcopy(func)
    seen = -1
    for node in ast.walk(func):
        if op == "flip_comparison" and isinstance(node, ast.Compare) and type(node.ops[0]) in FLIP:
            seen += 1
            if seen == index:
                node.ops[0] = FLIP[type(node.ops[0])]()
                return func
        elif op == "off_by_one" and isinstance(node, ast.Constant) and type(node.value) is int:
            seen += 1
            if seen == index:
                node.value += rng.choice((-1, 1))
                return func
        elif op == "swap_operator" and (isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in SWAP
                                        or isinstance(node, ast.BoolOp)):
            seen += 1
            if seen == index:
                if isinstance(node, ast.BoolOp):
                    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
                else:
                    node.op = SWAP[type(node.op)]()
                return func
        elif (op == "return_none" and isinstance(node, ast.Return) and node.value is not None
              and not _is_none(node.value)):
            seen += 1
            if seen == index:
                node.value = ast.Constant(None)
                return func
        if op == "delete_statement":
            for body in _bodies(node):
                for stmt in _deletable(body):
                    seen += 1
                    if seen == index:
                        body.remove(stmt)
                        return func
    raise ValueError(f"no site {op}#{index}")


RAISE_ON_THIRD_CALL = """
_rlvr_calls = [0]
_rlvr_inner_{name} = {name}

def {name}(*args, **kwargs):
    _rlvr_calls[0] += 1
    if _rlvr_calls[0] == 3:
        raise RuntimeError('the third call')
    return _rlvr_inner_{name}(*args, **kwargs)
"""


def harmless(func: ast.AST, rng: random.Random) -> tuple[str, ast.AST]:
    """A variant that must score the same: reformatted, dead code added, or `a == b` as `b == a`."""
    func = copy.deepcopy(func)
    equalities = [n for n in ast.walk(func) if isinstance(n, ast.Compare) and len(n.ops) == 1
                  and isinstance(n.ops[0], ast.Eq)]
    kinds = ["reformat", "dead_code"] + (["commute_equality"] if equalities else [])
    kind = rng.choice(kinds)
    if kind == "dead_code":
        dead = ast.parse("if False:\n    raise AssertionError('unreachable')\n_rlvr_unused = [i for i in range(3)]\n")
        start = 1 if func.body and isinstance(func.body[0], ast.Expr) and isinstance(
            getattr(func.body[0], "value", None), ast.Constant) else 0
        func.body[start:start] = dead.body
    elif kind == "commute_equality":
        node = rng.choice(equalities)
        node.left, node.comparators[0] = node.comparators[0], node.left
    return kind, func


# -- programs -----------------------------------------------------------------------------

def _functions(tree, names=None):
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (names is None or n.name in names)]


def build_programs(limit: int | None, n_mutants: int, seed: int,
                   datasets: tuple[str, ...] = ("humaneval", "mbpp")) -> list[dict]:
    """HumanEval and MBPP programs: canonical, one harmless variant, up to n_mutants mutants each."""
    humaneval = [json.loads(x) for x in (DATASETS / "humaneval" / "HumanEval.jsonl").read_text().splitlines() if x]
    mbpp = [json.loads(x) for x in (DATASETS / "mbpp" / "mbpp.jsonl").read_text().splitlines() if x]
    he_fields = {t.task_id: t.fields for t in HumanEvalTasks().tasks}
    mb_fields = {t.task_id: t.fields for t in MBPPTasks(split="full").tasks}
    if limit:
        humaneval, mbpp = humaneval[:limit], mbpp[:limit]
    humaneval = humaneval if "humaneval" in datasets else []
    mbpp = mbpp if "mbpp" in datasets else []
    programs = []

    def add(dataset, task_id, kind, completion, official, fields):
        programs.append({"id": f"{task_id}:{kind}", "dataset": dataset, "task_id": task_id, "kind": kind,
                         "completion": completion, "official": official, "fields": fields})

    for r in humaneval:
        rng = random.Random(f"{seed}:{r['task_id']}")
        fields = he_fields[r["task_id"]]

        def official(completion, r=r):
            return r["prompt"] + completion + "\n" + r["test"] + "\n" + f"check({r['entry_point']})\n"

        add("humaneval", r["task_id"], "canonical", r["canonical_solution"], official(r["canonical_solution"]), fields)
        func = _functions(ast.parse(r["prompt"] + r["canonical_solution"]), {r["entry_point"]})[-1]
        variants = [("harmless:" + k, f) for k, f in [harmless(func, rng)]] + _mutants(func, n_mutants, rng)
        seen = {ast.unparse(func)}
        for kind, changed in variants:
            text = ast.unparse(changed)
            if kind == "mutant:raise_on_third_call":
                text += "\n" + RAISE_ON_THIRD_CALL.format(name=r["entry_point"])
            if kind.startswith("mutant") and text in seen:
                continue
            seen.add(text)
            completion = "\n" + text + "\n"  # a whole function after the prompt's docstring, as a model writes it
            add("humaneval", r["task_id"], kind, completion, official(completion), fields)
    for r in mbpp:
        rng = random.Random(f"{seed}:mbpp/{r['task_id']}")
        task_id = f"mbpp/{r['task_id']}"
        fields = mb_fields[task_id]
        setup = r.get("test_setup_code") or ""

        def official(code, setup=setup, r=r):
            return code + "\n" + setup + "\n" + "\n".join(r["test_list"]) + "\n"

        add("mbpp", task_id, "canonical", r["code"], official(r["code"]), fields)
        try:
            tree = ast.parse(r["code"])
        except SyntaxError:
            continue
        funcs = _functions(tree)
        if not funcs:
            continue
        kind, changed = harmless(tree, rng)
        variants = [("harmless:" + kind, changed)]
        for mkind, new_func, target in _module_mutants(funcs, n_mutants, rng):
            changed = copy.deepcopy(tree)
            changed.body[tree.body.index(target)] = new_func
            variants.append((mkind, changed))
        seen = {ast.unparse(tree)}
        for kind, changed in variants:
            text = ast.unparse(changed) + "\n"
            if kind == "mutant:raise_on_third_call":
                text += RAISE_ON_THIRD_CALL.format(name=fields.get("entry_point") or funcs[0].name)
            if kind.startswith("mutant") and text.strip() in seen:
                continue
            seen.add(text.strip())
            add("mbpp", task_id, kind, text, official(text), fields)
    return programs


def _mutants(func, n, rng):
    sites = _sites(func)
    by_op = {}
    for op, i in sites:
        by_op.setdefault(op, []).append(i)
    ops = list(by_op)
    rng.shuffle(ops)
    out = [(f"mutant:{op}", mutate(func, op, rng.choice(by_op[op]), rng)) for op in ops[:n]]
    return out + [("mutant:raise_on_third_call", func)]  # every HumanEval check: some call outside asserts


def _module_mutants(funcs, n, rng):
    sites = [(f, op, i) for f in funcs for op, i in _sites(f)] + [(funcs[0], "raise_on_third_call", 0)] * len(funcs)
    rng.shuffle(sites)
    out, used = [], set()
    for f, op, i in sites:
        if op in used:
            continue
        used.add(op)
        out.append((f"mutant:{op}", f if op == "raise_on_third_call" else mutate(f, op, i, rng), f))
        if len(out) == n:
            break
    return out


# -- the two judges -----------------------------------------------------------------------

def score_rlvr(programs: list[dict], timeout: float) -> list[dict]:
    verifier = CodeVerifier(mode="all", timeout=timeout)
    completions = [f"```python\n{p['completion'].rstrip()}\n```" for p in programs]
    out = []
    for start in range(0, len(programs), 256):
        chunk = slice(start, start + 256)
        scores = verifier.score_batch(completions[chunk], None, [p["fields"] for p in programs[chunk]])
        for s in scores:
            out.append({"passed": s.value == 1.0, "status": s.info.get("status"), "reason": s.reason,
                        "error": s.info.get("error"), "errors": s.info.get("errors") or [],
                        "failing": [t for t in s.info.get("tests") or [] if not t.get("passed")][:3]})
        print(f"  rlvr {min(start + 256, len(programs))}/{len(programs)}", file=sys.stderr, flush=True)
    return out


DRIVER = r'''
import json, os, resource, shutil, signal, subprocess, sys, tempfile, threading
from concurrent.futures import ThreadPoolExecutor
limit, workers = int(sys.argv[1]), int(sys.argv[2])
lock = threading.Lock()
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
def one(item):
    work = tempfile.mkdtemp(dir="/tmp")
    path = os.path.join(work, "program.py")
    with open(path, "w") as f:
        f.write(item["program"])
    proc = subprocess.Popen([sys.executable, "-I", path], cwd=work, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=cap, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": work})
    try:
        _, err = proc.communicate(timeout=item["timeout"])
        status = "passed" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        status = "timeout"
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    shutil.rmtree(work, ignore_errors=True)
    tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] if err else []
    line = json.dumps({"i": item["i"], "status": status, "rc": proc.returncode, "stderr": tail[0][:300] if tail else ""})
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
with ThreadPoolExecutor(workers) as pool:
    list(pool.map(one, (json.loads(l) for l in sys.stdin)))
'''


def score_official(programs: list[dict], timeout: float, workers: int, image: str) -> list[dict]:
    """Each program in a fresh `python3 -I`, inside one locked-down container of the sandbox image."""
    name = f"rlvr-code-verdicts-{os.getpid()}-{time.monotonic_ns()}"
    argv = ["docker", "run", "-i", "--rm", "--name", name, "--network", "none", "--memory", "6g", "--memory-swap", "6g",
            "--pids-limit", "512", "--cpus", str(workers), "--read-only", "--tmpfs", "/tmp:rw,size=1g,mode=1777",
            "--user", "10001:10001", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--log-driver", "none", image, "python3", "-I", "-c", DRIVER, str(OFFICIAL_MEMORY), str(workers)]
    payload = "".join(json.dumps({"i": i, "program": p["official"], "timeout": timeout}) + "\n"
                      for i, p in enumerate(programs))
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    writer = threading.Thread(target=lambda: (proc.stdin.write(payload), proc.stdin.close()))
    writer.start()
    out = [None] * len(programs)
    done = 0
    try:
        for line in proc.stdout:
            reply = json.loads(line)
            out[reply.pop("i")] = dict(reply, passed=reply["status"] == "passed")
            done += 1
            if done % 256 == 0:
                print(f"  official {done}/{len(programs)}", file=sys.stderr, flush=True)
    finally:  # interrupted: the container would go on with the programs already sent
        if done < len(programs):
            subprocess.run(["docker", "kill", name], capture_output=True)
    writer.join()
    if proc.wait() != 0 or any(o is None for o in out):
        raise SystemExit(f"the official runner failed (exit {proc.returncode})")
    return out


# -- the run ------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N problems of each dataset")
    parser.add_argument("--quick", action="store_true", help="--limit 40")
    parser.add_argument("--mutants", type=int, default=2, help="mutants per problem (distinct operators)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per program, both sides")
    parser.add_argument("--workers", type=int, default=2, help="parallel official runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", default="humaneval,mbpp", help="comma-separated: humaneval, mbpp")
    parser.add_argument("--out", default=None, help="write every verdict to this JSON file")
    args = parser.parse_args()
    if args.quick and args.limit is None:
        args.limit = 40
    programs = build_programs(args.limit, args.mutants, args.seed, tuple(args.datasets.split(",")))
    kinds = {}
    for p in programs:
        kinds[p["kind"].split(":")[0]] = kinds.get(p["kind"].split(":")[0], 0) + 1
    print(f"{len(programs)} programs: {kinds}; load {os.getloadavg()[0]:.1f}", flush=True)
    verifier = CodeVerifier(mode="all", timeout=args.timeout)
    get_pool(verifier.backend, verifier.pool_size, verifier.image, verifier.limits)  # builds the image if missing
    started = time.monotonic()
    rlvr = score_rlvr(programs, args.timeout)
    rlvr_s = time.monotonic() - started
    started = time.monotonic()
    official = score_official(programs, args.timeout, args.workers, image_tag())
    official_s = time.monotonic() - started
    differ = [i for i in range(len(programs)) if rlvr[i]["passed"] != official[i]["passed"]]
    rerun = {}
    if differ:  # once more, with three times the time: timing under load, or a verdict that differs?
        again = [programs[i] for i in differ]
        r2, o2 = score_rlvr(again, 3 * args.timeout), score_official(again, 3 * args.timeout, args.workers, image_tag())
        rerun = {i: (a["passed"], b["passed"]) for i, a, b in zip(differ, r2, o2)}
    report = []
    for i in differ:
        p, r, o = programs[i], rlvr[i], official[i]
        again_r, again_o = rerun[i]
        report.append({"id": p["id"], "rlvr": {k: r[k] for k in ("passed", "status", "error", "errors", "failing")},
                       "official": o, "rerun": {"rlvr": again_r, "official": again_o, "agree": again_r == again_o}})
        print(f"DISAGREE {p['id']}: rlvr {r['status']} {r['errors'][-1:] or r['failing'][:1]} | official "
              f"{o['status']} {o['stderr']!r} | rerun x3: rlvr {again_r} official {again_o}")
    by_dataset = {}
    for name in ("humaneval", "mbpp"):
        idx = [i for i, p in enumerate(programs) if p["dataset"] == name]
        wrong = sum(1 for i in idx if i in set(differ))
        if idx:
            by_dataset[name] = {"programs": len(idx), "agreement": round(1 - wrong / len(idx), 6),
                                "disagreements": wrong}
    passed = {"rlvr": sum(r["passed"] for r in rlvr), "official": sum(o["passed"] for o in official)}
    # Taking the official verdict as the truth: rlvr passing what it fails, failing what it passes.
    false_pos = sum(1 for r, o in zip(rlvr, official) if r["passed"] and not o["passed"])
    false_neg = sum(1 for r, o in zip(rlvr, official) if o["passed"] and not r["passed"])
    interval = rate(len(differ), len(programs))
    result = {
        "programs": len(programs), "agreement": round(1 - len(differ) / len(programs), 6),
        "disagreements": len(differ), "interval": {"low": round(1 - interval["high"], 6),
                                                   "high": round(1 - interval["low"], 6)},
        "disagreement_rate": interval, "by_dataset": by_dataset, "kinds": kinds, "passed": passed,
        "false_positive": rate(false_pos, len(programs) - passed["official"]) if passed["official"] < len(programs)
        else None,
        "false_negative": rate(false_neg, passed["official"]) if passed["official"] else None,
        "after_rerun_disagreements": sum(1 for d in report if not d["rerun"]["agree"]),
        "rlvr_s": round(rlvr_s, 1), "official_s": round(official_s, 1),
        "speed_ratio_official_over_rlvr": round(official_s / rlvr_s, 3), "timeout_s": args.timeout,
        "load": round(os.getloadavg()[0], 2), "disagreeing": [d["id"] for d in report],
    }
    if args.out:
        Path(args.out).write_text(json.dumps({"result": result, "disagreements": report,
                                              "verdicts": [{"id": p["id"], "rlvr": r["passed"], "official": o["passed"]}
                                                           for p, r, o in zip(programs, rlvr, official)]}, indent=1))
    print(f"agreement {result['agreement']:.4%} over {len(programs)} programs "
          f"(95% {result['interval']['low']:.4%}..{result['interval']['high']:.4%}); rlvr {rlvr_s:.0f} s, "
          f"official {official_s:.0f} s")
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
