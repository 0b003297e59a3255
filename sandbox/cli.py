"""`rlvr sandbox build|check`: make the sandbox image, and say whether the sandbox is usable.

`check` runs one real job (a correct and a wrong solution) in a fresh container, so "ok"
means the engine, the image and the harness all work, not just that a socket answers.
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sandbox_command", metavar="ACTION")
    sub.required = True
    build = sub.add_parser("build", help="build the sandbox image (offline via debootstrap if no registry)")
    build.add_argument("--offline", action="store_true", help="skip the registry and debootstrap at once")
    build.add_argument("--tag", default=None, help="image tag (default: rlvr-sandbox:<hash of the harness>)")
    build.add_argument("--languages", action="store_true",
                       help="build the image with every language's toolchain (C, C++, Java, JavaScript, Go, Rust)")
    check = sub.add_parser("check", help="check that the engine and the image work")
    check.add_argument("--image", default=None, help="image to check (default: the current tag)")
    check.add_argument("--json", action="store_true", help="print the findings as JSON")


def run(args: argparse.Namespace) -> int:
    if args.sandbox_command == "build":
        return _build(args)
    return _check(args)


def _build(args) -> int:
    from rlvr.sandbox.image import ImageError, build_image, docker_client, image_exists, image_tag

    try:
        client = docker_client(timeout=600)
    except Exception as exc:
        print(f"rlvr sandbox build: no Docker engine answers: {exc}")
        return 1
    tag = args.tag or image_tag(args.languages)
    if image_exists(client, tag):
        print(f"{tag} already exists")
        return 0
    try:
        build_image(client, tag, offline=True if args.offline else None, languages=args.languages)
    except ImageError as exc:
        print(f"rlvr sandbox build: {exc}")
        return 1
    print(f"built {tag}")
    return 0


def check_sandbox(image: str | None = None) -> dict:
    """Findings: engine reachable, image present, a real job judged right. `ok` sums them up."""
    from rlvr.sandbox.image import docker_client, image_exists, image_tag

    report = {"ok": False, "engine": False, "image": image or image_tag(), "image_present": False,
              "job": False, "problem": None}
    try:
        client = docker_client(timeout=30)
        report["engine"] = True
        report["engine_version"] = client.version().get("Version")
    except Exception as exc:
        report["problem"] = f"no Docker engine answers ({type(exc).__name__}: {str(exc)[:160]}); start dockerd or set DOCKER_HOST"
        return report
    if not image_exists(client, report["image"]):
        report["problem"] = f"image {report['image']} is missing; run `rlvr sandbox build`"
        return report
    report["image_present"] = True
    from rlvr.sandbox.pool import SandboxPool, SandboxUnavailable
    from rlvr.sandbox.protocol import Job

    tests = "def check(candidate):\n    assert candidate(3) == 9\n"
    try:
        with SandboxPool(backend="docker", size=1, image=report["image"], build=False) as pool:
            good, bad = (pool.run(Job(code=c, tests=tests, entry_point="sq"))
                         for c in ("def sq(x):\n    return x * x\n", "def sq(x):\n    return x\n"))
    except SandboxUnavailable as exc:
        report["problem"] = str(exc)
        return report
    if good.status == "passed" and bad.status == "failed":
        report["job"] = True
        report["ok"] = True
    else:
        report["problem"] = f"a test job was judged wrongly: {good.status}/{bad.status} ({good.error or bad.error})"
    return report


def _check(args) -> int:
    report = check_sandbox(args.image)
    if args.json:
        print(json.dumps(report))
    elif report["ok"]:
        print(f"ok: Docker {report.get('engine_version')} with {report['image']}: jobs are judged correctly")
    else:
        print(f"not usable: {report['problem']}")
    return 0 if report["ok"] else 1
