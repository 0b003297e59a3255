"""Building the sandbox image, with a registry or without one.

The image tag carries a hash of the Dockerfile, the harness and the runner, so a changed
harness gets a new image and an existing image is never rebuilt. With a registry the
Dockerfile builds `FROM python:3.11-slim`. Without one (CI machines, air-gapped hosts) the
same Dockerfile builds on a base made here: `debootstrap` a minimal Debian bookworm with the
full `python3` package (not `python3-minimal`, which lacks json and unittest) from the
mirror apt already uses, then `docker import` it.

Two images, so that Python-only users never pay for compilers: `rlvr-sandbox` (Python, about
200 MB) and `rlvr-sandbox-langs` (the same harness on a base that also holds the C, C++,
Java, JavaScript, Go and Rust toolchains of `LANGUAGE_PACKAGES`, always built offline). The
pool starts workers of the second only when a job in another language arrives. debootstrap
keeps the downloaded .debs in `deb_cache_dir()`, so a rebuild downloads nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from rlvr.sandbox.docker_backend import LANGUAGE_REPOSITORY

HERE = Path(__file__).resolve().parent
CONTEXT_FILES = ("Dockerfile", "harness.py", "tester.py", "values.py", "cleanup.py", "zygote.py", "runner.py",
                 "languages.py")
REPOSITORY = "rlvr-sandbox"
ONLINE_BASE = ("python", "3.11-slim")
OFFLINE_BASE = "rlvr-sandbox-base:bookworm"
LANGUAGE_BASE = "rlvr-sandbox-base-langs:bookworm"
PYTHON_PACKAGES = ("python3",)
# Not needed to compile or run a program: documentation, translations, jlink's modules, Go's tests.
JUNK = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt/archives",
        "usr/lib/jvm/*/jmods", "usr/share/go-*/test", "usr/share/go-*/src/**/testdata")
# Debian bookworm: gcc/g++ 12.2, OpenJDK 17, Node.js 18, Go 1.19, rustc 1.63 (see languages.py).
LANGUAGE_PACKAGES = ("python3", "gcc", "g++", "libc6-dev", "openjdk-17-jdk-headless", "nodejs", "golang-go",
                     "rustc")
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


class ImageError(RuntimeError):
    """The image could not be built; the message says what to do."""


def image_tag(languages: bool = False) -> str:
    """`rlvr-sandbox:<hash of the build context>`, or `rlvr-sandbox-langs:<hash>` for the image
    with every language's toolchain."""
    digest = hashlib.sha256()
    for name in CONTEXT_FILES:
        digest.update(name.encode() + b"\0" + (HERE / name).read_bytes())
    if languages:
        digest.update(" ".join(LANGUAGE_PACKAGES).encode())
        return f"{LANGUAGE_REPOSITORY}:{digest.hexdigest()[:12]}"
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def deb_cache_dir() -> Path:
    """Where debootstrap keeps downloaded packages between builds (`$RLVR_DEB_CACHE`)."""
    return Path(os.environ.get("RLVR_DEB_CACHE") or Path.home() / ".cache" / "rlvr" / "debs")


def docker_client(timeout: int = 120):
    """A client for the local engine or `DOCKER_HOST`; raises when none answers."""
    import docker

    client = docker.from_env(timeout=timeout)
    client.ping()
    return client


def image_exists(client, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def build_image(client=None, tag: str | None = None, offline: bool | None = None,
                log: Callable[[str], None] = print, languages: bool = False) -> str:
    """Build the sandbox image unless it exists; returns its tag.

    `offline=None` tries the registry first and falls back to debootstrap when it fails.
    `languages=True` builds the image with every language's toolchain (always offline).
    """
    client = client or docker_client(timeout=600)
    tag = tag or image_tag(languages)
    if image_exists(client, tag):
        return tag
    if languages:
        offline = True
    if offline is None:
        offline = not _registry_base_available(client, log)
    with tempfile.TemporaryDirectory(prefix="rlvr-image-") as context:
        for name in CONTEXT_FILES:
            shutil.copy(HERE / name, Path(context) / name)
        buildargs = {}
        if offline:
            buildargs["BASE"] = (ensure_offline_base(client, log, LANGUAGE_PACKAGES, LANGUAGE_BASE) if languages
                                 else ensure_offline_base(client, log))
        log(f"building {tag} from {'the debootstrapped base' if offline else 'python:3.11-slim'}")
        import docker

        try:
            client.images.build(path=context, tag=tag, buildargs=buildargs, rm=True, forcerm=True,
                                pull=False, network_mode="none")
        except docker.errors.BuildError as exc:
            tail = " | ".join(str(c.get("stream", c.get("error", ""))).strip() for c in exc.build_log[-5:])
            raise ImageError(f"docker build of {tag} failed: {exc.msg}: {tail}") from None
    return tag


def _registry_base_available(client, log) -> bool:
    import docker

    name = ":".join(ONLINE_BASE)
    if image_exists(client, name):
        return True
    try:
        client.images.pull(ONLINE_BASE[0], tag=ONLINE_BASE[1])
        return True
    except docker.errors.APIError as exc:
        log(f"no registry ({str(exc.explanation or exc)[:120]}); building offline")
        return False


def ensure_offline_base(client, log: Callable[[str], None] = print, packages=PYTHON_PACKAGES,
                        name: str = OFFLINE_BASE) -> str:
    """Import a debootstrapped Debian with `packages` as `name` (once)."""
    if image_exists(client, name):
        return name
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap"
                                                 if os.path.exists("/usr/sbin/debootstrap") else None)
    if debootstrap is None:
        raise ImageError("no registry and no debootstrap: install it (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise ImageError("building the image offline runs debootstrap, which needs root")
    mirror = debian_mirror()
    cache = deb_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rlvr-rootfs-") as tmp, scratch_root(Path(tmp) / "root") as root:
        log(f"debootstrap {SUITE} with {', '.join(packages)} from {mirror} (a few minutes; .debs cached in {cache})")
        proc = subprocess.run(
            [debootstrap, "--variant=minbase", f"--cache-dir={cache}", f"--include={','.join(packages)}",
             SUITE, str(root), mirror],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise ImageError(f"debootstrap failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
        for pattern in JUNK:
            for junk in root.glob(pattern):
                shutil.rmtree(junk, ignore_errors=True)
        archive = Path(tmp) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        log(f"importing the root file system as {name}")
        repository, tag = name.split(":")
        client.api.import_image_from_file(str(archive), repository=repository, tag=tag)
    if not image_exists(client, name):
        raise ImageError(f"docker import did not produce {name}")
    return name


@contextlib.contextmanager
def scratch_root(root: Path):
    """A directory for the root file system, on a private tmpfs when we may mount one: dpkg
    syncs every file it unpacks, which on a busy disk is most of a debootstrap's time."""
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6g,mode=0755", "rlvr-rootfs", str(root)],
                             capture_output=True).returncode == 0
    try:
        yield root
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(root)], capture_output=True)


def debian_mirror() -> str:
    """The Debian mirror apt uses here (deb822 `.sources` or one-line `sources.list`)."""
    candidates = [Path("/etc/apt/sources.list")]
    sources_d = Path("/etc/apt/sources.list.d")
    if sources_d.is_dir():
        candidates += sorted(sources_d.iterdir())
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for match in re.finditer(r"(?m)^\s*(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text):
            uri = match.group(1)
            if "security" not in uri and uri.startswith(("http://", "https://")):
                return uri.rstrip("/")
    return DEFAULT_MIRROR
