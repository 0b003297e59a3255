"""The `rlvr` command line.

Each subcommand lives in a small module with `add_arguments(parser)` and `run(args) -> int`,
imported when the parser is built; heavy imports happen inside `run`. A user's mistake
(bad flag, unknown name, missing file) prints one line and exits 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

# name -> (module, help). Modules of parts that are not installed are left out.
COMMANDS = {
    "verify": ("rlvr.cli", "score one completion with a registered verifier"),
    "list": ("rlvr.listing", "list verifiers and environments (filter by family or a search word)"),
    "sandbox": ("rlvr.sandbox.cli", "build or check the Docker sandbox image"),
    "repo": ("rlvr.envs.repo_build", "build repository tasks from a PyPI package (rlvr repo build NAME==VERSION)"),
    "eval": ("rlvr.evaluation.cli", "evaluate a model on an environment (pass@1, pass@k)"),
    "train": ("rlvr.trainer.cli", "train a model with GRPO from a YAML config"),
    "plot": ("rlvr.trainer.plot", "write PNG curves for a training run"),
    "export": ("rlvr.trainer.export", "write a run's trained model (LoRA merged) as a transformers folder"),
    "serve": ("rlvr.integrations.serve", "serve verifiers over HTTP"),
    "serve-env": ("rlvr.integrations.serve_env", "serve an env id as an OpenEnv server (HTTP and WebSocket)"),
}


class UsageError(Exception):
    """A mistake in how the command was called: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rlvr", description="Reinforcement learning with verifiable rewards.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # that part is not built or installed
            if exc.name != module_name:
                raise
            continue
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        adder = getattr(module, f"add_{name}_arguments", None) or module.add_arguments
        runner = getattr(module, f"run_{name}", None) or module.run
        adder(cmd)
        cmd.set_defaults(_run=runner)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args._run(args) or 0)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (LookupError, ValueError, OSError, TypeError) as exc:
        print(f"rlvr: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


# --- rlvr verify -----------------------------------------------------------------------


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("verifier", help="registered verifier name (see `rlvr list`)")
    parser.add_argument("--reference", "-r", default=None, help="the reference answer")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--completion", "-c", help="the completion text")
    group.add_argument("--completion-file", "-f", help="read the completion from a file ('-' for stdin)")
    parser.add_argument("--field", action="append", default=[], metavar="KEY=JSON",
                        help="a task field passed to the verifier (value parsed as JSON, else a string)")
    parser.add_argument("--option", "-o", action="append", default=[], metavar="KEY=JSON",
                        help="a constructor option of the verifier")
    parser.add_argument("--json", action="store_true", help="print the score as JSON")


def run_verify(args: argparse.Namespace) -> int:
    from rlvr.registry import make_verifier

    if args.completion_file is not None:
        if args.completion_file == "-":
            completion = sys.stdin.read()
        else:
            with open(args.completion_file, encoding="utf-8", errors="replace") as fh:
                completion = fh.read()
    else:
        completion = args.completion
    fields = key_values(args.field, "--field")
    verifier = make_verifier(args.verifier, **key_values(args.option, "--option"))
    score = verifier.score(completion, args.reference, **fields)
    if args.json:
        print(json.dumps(score.to_dict(), ensure_ascii=False))
    else:
        print(f"score: {score.value:g}")
        if score.reason:
            print(f"reason: {score.reason}")
        for key, value in score.components.items():
            why = f"  ({score.reasons[key]})" if key in score.reasons else ""
            print(f"  {key}: {value:g}{why}")
    return 0


def key_values(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"rlvr: {flag} expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out
