"""Task images for repository tasks: one per package version, built offline, cached by tag.

An image is the debootstrapped Debian bookworm base (`rlvr-repo-base:bookworm`: python3, git,
patch; built like the sandbox's offline base, no registry needed) plus pytest and its
dependencies (pure wheels fetched from PyPI, pinned), the package's sdist unpacked at /repo
exactly as released (the correct code: a task's bug is applied as a patch when a container
starts) and the grader's worker and plugin in /opt/rlvr-repo, with the bytecode of the released
modules and tests (pytest's assert rewriting included) compiled once at build: a grade that
compiled them again spent two thirds of its time doing so. The agent's workspace runs as
another user, who cannot read that cache (it holds the tests a task may hide). Nothing about any task (bug,
gold patch, hidden tests) is in it. The tag hashes the sdist's sha256, the pinned wheels and
the worker files, so an image is built once, on first use, and never rebuilt.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from rlvr.sandbox.image import ImageError, docker_client, ensure_offline_base, image_exists

HERE = Path(__file__).resolve().parent
BASE = "rlvr-repo-base:bookworm"
BASE_PACKAGES = ("python3", "git", "patch")
TEST_WHEELS = ("pytest==8.3.4", "pluggy==1.5.0", "iniconfig==2.0.0", "packaging==24.2")
WORKER_FILES = ("repo_worker.py", "repo_plugin.py")
PYTEST_INI = "[pytest]\n"
SITE = "/usr/local/lib/python3.11/dist-packages"
PYCACHE = "/opt/rlvr-repo/pycache"  # the released code and tests compiled, for the grader's test user only (gid 10001)
DOCKERFILE = f"""FROM {BASE}
RUN echo 'sandbox:x:10001:10001:rlvr test user:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \\
 && echo 'sandbox:x:10001:' >> /etc/group && mkdir -p /opt/rlvr-repo {SITE}
COPY site/ {SITE}/
COPY repo/ /repo/
RUN find /repo -name '__pycache__' -prune -exec rm -rf {{}} + ; find /repo -name '*.py[co]' -delete; \\
    chmod -R a+rX,go-w /repo {SITE} && python3 -c "import pytest"
COPY repo_worker.py repo_plugin.py pytest.ini /opt/rlvr-repo/
RUN chmod 0755 /opt/rlvr-repo && chmod 0644 /opt/rlvr-repo/*
RUN cp -a /repo /tmp/rlvr-work && cd /tmp/rlvr-work && if [ -d src ]; then P=$PWD/src; else P=$PWD; fi; \
    PYTHONPATH=$P python3 -X pycache_prefix={PYCACHE} -m pytest -c /opt/rlvr-repo/pytest.ini \
      --rootdir /tmp/rlvr-work -p no:cacheprovider --collect-only -q >/dev/null 2>&1; \
    rm -rf /tmp/rlvr-work && mkdir -p {PYCACHE} && chown -R root:10001 {PYCACHE} \
 && chmod -R u=rwX,g=rX,o= {PYCACHE}
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
WORKDIR /repo
"""


def cache_dir() -> Path:
    import os

    return Path(os.environ.get("RLVR_REPO_CACHE") or Path.home() / ".cache" / "rlvr" / "repo")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_tag(package: str, version: str, sdist_sha256: str) -> str:
    """`rlvr-repo-<package>:<version>-<hash of sdist, wheels and worker>`."""
    digest = hashlib.sha256(f"{sdist_sha256}\0{TEST_WHEELS}\0{DOCKERFILE}\0{PYTEST_INI}".encode())
    for name in WORKER_FILES:
        digest.update((HERE / name).read_bytes())
    safe_version = re.sub(r"[^A-Za-z0-9_.-]", "_", version)[:60]
    return f"rlvr-repo-{normalise(package)}:{safe_version}-{digest.hexdigest()[:12]}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_sdist(package: str, version: str, log: Callable[[str], None] = print) -> Path:
    """The sdist of package==version, downloaded once with pip into the cache."""
    folder = cache_dir() / "sdists" / f"{normalise(package)}-{version}"
    found = sorted(p for p in folder.glob("*") if p.name.endswith((".tar.gz", ".zip", ".tar.bz2")))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    log(f"pip download {package}=={version} (sdist)")
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                           "-d", str(folder), f"{package}=={version}"],
                          capture_output=True, text=True, timeout=600)
    found = sorted(p for p in folder.glob("*") if p.name.endswith((".tar.gz", ".zip", ".tar.bz2")))
    if proc.returncode != 0 or not found:
        raise ImageError(f"no sdist for {package}=={version}: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return found[0]


def fetch_wheels(log: Callable[[str], None] = print) -> Path:
    """The pinned pytest wheels (pure Python), downloaded once."""
    folder = cache_dir() / "wheels"
    if len(list(folder.glob("*.whl"))) >= len(TEST_WHEELS):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    log(f"pip download {' '.join(TEST_WHEELS)}")
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "--no-deps",
                           "--python-version", "3.11", "-d", str(folder), *TEST_WHEELS],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise ImageError(f"could not download {TEST_WHEELS}: {proc.stderr.strip()[-300:]}")
    return folder


def unpack_sdist(sdist: Path, dest: Path) -> Path:
    """Unpack into dest/repo (the sdist's single top folder becomes repo/); refuses links out."""
    staging = dest / "unpack"
    staging.mkdir(parents=True)
    if sdist.name.endswith(".zip"):
        with zipfile.ZipFile(sdist) as archive:
            archive.extractall(staging)
    else:
        with tarfile.open(sdist) as archive:
            archive.extractall(staging, filter="data")
    tops = list(staging.iterdir())
    top = tops[0] if len(tops) == 1 and tops[0].is_dir() else staging
    repo = dest / "repo"
    top.rename(repo)
    return repo


def build_task_image(package: str, version: str, sdist: Path | None = None, client=None,
                     log: Callable[[str], None] = print) -> tuple[str, str]:
    """Build (unless present) the image of package==version; returns (tag, sdist sha256)."""
    sdist = sdist or fetch_sdist(package, version, log)
    sha = sha256_file(sdist)
    tag = image_tag(package, version, sha)
    client = client or docker_client(timeout=900)
    if image_exists(client, tag):
        return tag, sha
    ensure_offline_base(client, log, BASE_PACKAGES, BASE)
    wheels = fetch_wheels(log)
    with tempfile.TemporaryDirectory(prefix="rlvr-repo-image-") as tmp:
        context = Path(tmp)
        unpack_sdist(sdist, context)
        site = context / "site"
        site.mkdir()
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
        for name in WORKER_FILES:
            shutil.copy(HERE / name, context / name)
        (context / "pytest.ini").write_text(PYTEST_INI)
        (context / "Dockerfile").write_text(DOCKERFILE)
        (context / ".dockerignore").write_text("unpack\n")
        log(f"building {tag}")
        import docker

        try:
            client.images.build(path=str(context), tag=tag, rm=True, forcerm=True, pull=False, network_mode="none")
        except docker.errors.BuildError as exc:
            tail = " | ".join(str(c.get("stream", c.get("error", ""))).strip() for c in exc.build_log[-5:])
            raise ImageError(f"docker build of {tag} failed: {exc.msg}: {tail}") from None
    return tag, sha


def ensure_image(package: str, version: str, sdist_sha256: str, log: Callable[[str], None] = print) -> str:
    """The image of a task, built on first use; refuses an sdist whose hash changed."""
    tag = image_tag(package, version, sdist_sha256)
    client = docker_client(timeout=900)
    if image_exists(client, tag):
        return tag
    sdist = fetch_sdist(package, version, log)
    if sdist_sha256 and sha256_file(sdist) != sdist_sha256:
        raise ImageError(f"the sdist of {package}=={version} does not match the task's sha256")
    return build_task_image(package, version, sdist, client, log)[0]
