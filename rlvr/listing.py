"""`rlvr list`: the registered verifiers and the env catalogue, filtered and counted by family.

    rlvr list                         everything, envs grouped by family with a count each
    rlvr list --envs --family games   one family's envs
    rlvr list sudoku                  a search word, matched in ids, families and descriptions
    rlvr list --families              the families and their counts only
"""

from __future__ import annotations

import argparse
import json
from collections import Counter


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("word", nargs="?", help="only entries whose name, family or description contain WORD")
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument("--envs", action="store_true", help="list environments only")
    kinds.add_argument("--verifiers", action="store_true", help="list verifiers only")
    parser.add_argument("--family", help="only envs of this family (see --families)")
    parser.add_argument("--families", action="store_true", help="print the env families with their counts")
    parser.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    from rlvr.registry import env_entries, list_verifiers

    word = (args.word or "").lower()
    entries = env_entries()
    families = Counter(e.family or "other" for e in entries)
    if args.family is not None and args.family not in families:
        raise LookupError(f"unknown env family {args.family!r} (known: {', '.join(sorted(families))})")
    envs = [e for e in entries
            if (args.family is None or (e.family or "other") == args.family)
            and word in f"{e.name} {e.family} {e.description}".lower()]
    verifiers = {} if args.envs or args.family is not None else {
        name: desc for name, desc in list_verifiers().items() if word in f"{name} {desc}".lower()}
    if args.verifiers:
        envs = []
    counts = dict(sorted(Counter(e.family or "other" for e in envs).items()))
    if args.json:
        out = {"families": counts} if args.families else {
            "verifiers": verifiers, "envs": {e.name: e.description for e in envs}, "families": counts}
        print(json.dumps(out, indent=2))
        return 0
    if args.families:
        for family, count in counts.items():
            print(f"{family:<14}{count}")
        print(f"{len(envs)} envs in {_families(len(counts))}")
        return 0
    width = max(map(len, [*verifiers, *(e.name for e in envs), ""])) + 2
    if verifiers or not (args.envs or args.family or envs):
        print("verifiers:")
        for name, desc in verifiers.items():
            print(f"  {name:<{width}}{desc}")
    if not args.verifiers:
        print(f"envs: {len(envs)} in {_families(len(counts))}")
        for family, count in counts.items():
            print(f" {family} ({count}):")
            for e in envs:
                if (e.family or "other") == family:
                    print(f"  {e.name:<{width}}{e.description}")
    _note_missing_extras(envs)
    return 0


def _families(count: int) -> str:
    return f"{count} family" if count == 1 else f"{count} families"


def _note_missing_extras(envs) -> None:
    try:
        from rlvr.envs import tasks_reasoning_gym as rg
    except ImportError:  # gymnasium missing: no envs at all
        return
    missing = [e for e in envs if e.name.startswith(f"{rg.NAMESPACE}/")]
    if missing and not rg.available():
        print(f"note: the {len(missing)} {rg.NAMESPACE}/* envs need the optional extra: {rg.INSTALL}")
