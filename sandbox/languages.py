"""The languages a stdin/stdout job may be written in: how to compile and run each one.

Standard library only: the tester imports it inside the image. Every language but Python is
compiled (or, for JavaScript, syntax-checked) once per job in the job's scratch directory,
as the job user, under the compile limits; the program is then run once per test case
without recompiling. Versions are those of Debian bookworm, the sandbox image's base
(see `image.LANGUAGE_PACKAGES`).

`address_limit`: whether the job's memory cap is enforced as an address-space rlimit. The
JVM, V8 and the Go runtime reserve far more address space than they use, so for them (and
for the compilers, which run under the container's memory limit) the cap is the container's
memory cgroup; the tester reads the cgroup's OOM counter to tell a memory kill from others.
`oom_markers`: what the runtime itself prints when an allocation fails, taken as a memory
verdict just as Python's MemoryError is (a program that fakes it still fails its tests).
"""

from __future__ import annotations

import re

# Each language: source file name, compile argv (None: nothing to compile), run argv,
# extra environment, whether RLIMIT_AS caps it, and out-of-memory markers in its stderr.
# "{mem}" is the job's memory cap in MiB.
LANGUAGES = {
    "python": {
        "source": "main.py", "compile": None, "run": None,  # the zygote's own interpreter
        "address_limit": True, "oom_markers": ("MemoryError",),
        "version": "CPython 3.11 (Debian python3 3.11.2)",
    },
    "c": {
        "source": "main.c",
        "compile": ["gcc", "-std=gnu17", "-O2", "-pipe", "-o", "main", "main.c", "-lm"],
        "run": ["./main"], "address_limit": False, "oom_markers": (),
        "version": "GCC 12.2 (Debian gcc-12)",
    },
    "cpp": {
        "source": "main.cpp",
        "compile": ["g++", "-std=gnu++17", "-O2", "-pipe", "-o", "main", "main.cpp"],
        "run": ["./main"], "address_limit": False, "oom_markers": ("std::bad_alloc",),
        "version": "GCC 12.2 (Debian g++-12)",
    },
    "java": {
        "source": "Main.java",
        "compile": ["javac", "-J-Xmx384m", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1",
                    "-encoding", "UTF-8", "-nowarn", "Main.java"],
        "run": ["java", "-Xmx{mem}m", "-Xss64m", "-XX:+UseSerialGC", "-cp", ".", "Main"],
        "address_limit": False, "oom_markers": ("java.lang.OutOfMemoryError",),
        "version": "OpenJDK 17.0.19 (Debian openjdk-17-jdk-headless)",
    },
    "javascript": {
        "source": "main.js", "compile": ["node", "--check", "main.js"],
        "run": ["node", "--max-old-space-size={mem}", "--stack-size=65500", "main.js"],
        "address_limit": False, "oom_markers": ("JavaScript heap out of memory",),
        "version": "Node.js 18.20 (Debian nodejs)",
    },
    "go": {
        "source": "main.go", "compile": ["go", "build", "-o", "main", "main.go"],
        "run": ["./main"], "address_limit": False, "oom_markers": ("runtime: out of memory",),
        "env": {"GOCACHE": "{scratch}/.gocache", "GOPATH": "{scratch}/.gopath", "GO111MODULE": "off",
                "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"},
        "version": "Go 1.19.8 (Debian golang-go)",
    },
    "rust": {
        "source": "main.rs",
        "compile": ["rustc", "--edition", "2021", "-O", "-o", "main", "main.rs"],
        "run": ["./main"], "address_limit": False, "oom_markers": ("memory allocation of",),
        "version": "rustc 1.63.0 (Debian rustc)",
    },
}
# Fence tags that mark a code block as written in each language ("" is an untagged fence).
FENCE_TAGS = {
    "python": ("python", "py", "python3", ""), "c": ("c", ""), "cpp": ("cpp", "c++", "cc", "cxx", ""),
    "java": ("java", ""), "javascript": ("javascript", "js", "node", "nodejs", ""),
    "go": ("go", "golang", ""), "rust": ("rust", "rs", ""),
}
ALIASES = {
    "py": "python", "python3": "python", "c++": "cpp", "cxx": "cpp", "cc": "cpp", "js": "javascript",
    "node": "javascript", "nodejs": "javascript", "golang": "go", "rs": "rust",
}
_JAVA_CLASS = re.compile(r"\bpublic\s+(?:final\s+|abstract\s+)*class\s+([A-Za-z_$][\w$]*)")


def canonical(name):
    """The language's key in LANGUAGES, or None if unknown (case-insensitive, common aliases)."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    return key if key in LANGUAGES else None


def plan(language, code, mem_mb, scratch):
    """(source file name, compile argv or None, run argv, env) for one job."""
    spec = LANGUAGES[language]
    source, compile_argv, run_argv = spec["source"], spec["compile"], spec["run"]
    if language == "java":  # javac wants the public class in a file of its own name
        match = _JAVA_CLASS.search(code)
        name = match.group(1) if match else "Main"
        source = f"{name}.java"
        compile_argv = [a if a != "Main.java" else source for a in compile_argv]
        run_argv = [a if a != "Main" else name for a in run_argv]
    fill = {"mem": str(mem_mb), "scratch": scratch}
    run_argv = [a.format(**fill) for a in run_argv] if run_argv else None
    env = {k: v.format(**fill) for k, v in spec.get("env", {}).items()}
    return source, compile_argv, run_argv, env
