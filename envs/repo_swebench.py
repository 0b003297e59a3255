"""Records in SWE-bench's schema as repository tasks: the same env (`rlvr/RepoFix-v0`) and grader.

A SWE-bench-style record (SWE-bench, SWE-Gym, R2E-style exports) has `instance_id`, `repo`,
`base_commit`, `patch` (the gold fix), `test_patch` (the tests that judge it, hidden from the
agent), `FAIL_TO_PASS` and `PASS_TO_PASS` (lists, or JSON strings of lists as SWE-bench ships
them), `problem_statement`, and an image that holds the repository at `base_commit` with its
dependencies installed (`image`, `image_name` or `docker_image`; else `image=` here, a tag or a
template with `{instance_id}`). `from_swebench` maps one onto a `RepoTask`: the image already
holds the bug, so there is no setup patch; the workspace never gets `test_patch` (its
`run_tests` runs the tests the repository has at `base_commit`), and the grader applies it in its
fresh container before running FAIL_TO_PASS and PASS_TO_PASS. The agent may change the top-level
folders the gold patch touches (`source_paths`, as a generated task's package source).

`to_swebench(task)` goes the other way, for rlvr's own generated tasks: it commits an image with
the bug applied and the tests that hold FAIL_TO_PASS removed, and writes a record whose
`test_patch` adds those test files back, which is how SWE-bench poses a task. The tests use it,
since no dataset hub can be reached here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rlvr.envs.repo_task import RepoTask, image_of

REQUIRED = ("instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")
IMAGE_KEYS = ("image", "image_name", "docker_image")
SWEBENCH_REPO_DIR = "/testbed"  # where SWE-bench's images hold the repository


def is_swebench_record(record: Any) -> bool:
    return isinstance(record, Mapping) and all(key in record for key in REQUIRED)


def _tests(value: Any, key: str, instance_id: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise ValueError(f"{instance_id}: {key} is neither a list nor a JSON list: {value[:80]!r}") from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"{instance_id}: {key} must be a list of test ids, got {type(value).__name__}")
    return tuple(value)


def patched_files(patch: str) -> list[str]:
    """The files a unified diff changes (its `+++ b/...` and `--- a/...` paths)."""
    files = []
    for line in patch.splitlines():
        if line.startswith(("+++ ", "--- ")):
            path = line[4:].split("\t")[0].strip()
            if path != "/dev/null":
                path = path[2:] if path[:2] in ("a/", "b/") else path
                if path not in files:
                    files.append(path)
    return files


def from_swebench(record: Mapping[str, Any], *, image: str | None = None, repo_dir: str | None = None) -> RepoTask:
    """A `RepoTask` from one SWE-bench-schema record (see the module doc); ValueError says what is wrong."""
    missing = [key for key in REQUIRED if key not in record]
    if missing:
        raise ValueError(f"not a SWE-bench record: missing {', '.join(missing)}")
    instance_id = str(record["instance_id"])
    tag = next((record[k] for k in IMAGE_KEYS if record.get(k)), None) or image
    if not tag:
        raise ValueError(f"{instance_id}: no image (give the record an `image`, or image= here)")
    tag = str(tag).format(instance_id=instance_id, instance_id_lower=instance_id.lower())
    gold = str(record["patch"])
    roots = []
    for path in patched_files(gold):
        root = path.split("/")[0] + ("/" if "/" in path else "")
        if root not in roots:
            roots.append(root)
    known = {*REQUIRED, *IMAGE_KEYS, "problem_statement", "version", "repo_dir"}
    task = RepoTask(
        instance_id=instance_id, package=str(record["repo"]),
        version=str(record.get("version") or record["base_commit"]),
        problem_statement=str(record.get("problem_statement") or ""),
        fail_to_pass=_tests(record["FAIL_TO_PASS"], "FAIL_TO_PASS", instance_id),
        pass_to_pass=_tests(record["PASS_TO_PASS"], "PASS_TO_PASS", instance_id),
        gold_patch=gold, source_paths=tuple(roots), image=tag,
        repo_dir=str(repo_dir or record.get("repo_dir") or SWEBENCH_REPO_DIR),
        test_patch=str(record["test_patch"]), source="swebench",
        extra={"base_commit": str(record["base_commit"]),
               **{k: v for k, v in record.items() if k not in known and isinstance(v, (str, int, float, bool))}},
    )
    if not task.fail_to_pass:
        raise ValueError(f"{instance_id}: FAIL_TO_PASS is empty: nothing would judge a fix")
    return task.with_hash()


def load_swebench(path: str, *, image: str | None = None, repo_dir: str | None = None) -> list[RepoTask]:
    """Tasks from a JSON Lines or JSON list file of SWE-bench records."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    records = json.loads(text) if text.lstrip().startswith("[") else [
        json.loads(line) for line in text.splitlines() if line.strip()]
    return [from_swebench(r, image=image, repo_dir=repo_dir) for r in records]


def to_swebench(task: RepoTask, *, tag: str | None = None, client=None) -> dict[str, Any]:
    """A SWE-bench record of a generated task, with an image committed for it (see the module doc)."""
    import docker

    from rlvr.sandbox.repo_workspace import WorkspacePool

    if task.mutation is None or not task.hidden_tests:
        raise ValueError(f"{task.instance_id}: only generated tasks with hidden_tests can be exported")
    client = client or docker.from_env()
    tag = tag or f"rlvr-swe-{task.instance_id.lower().replace('/', '-').replace('_', '-')}:{task.content_hash[:12] or 'x'}"
    pool = WorkspacePool(image_of(task), task.repo_dir, size=1, client=client)
    try:
        workspace = pool.acquire()
    finally:
        pool.close()
    with workspace:
        applied = workspace.request("apply", patch=task.setup_patch)
        if "error" in applied:
            raise ValueError(f"{task.instance_id}: the bug does not apply: {applied['error']}")
        tests = {path: workspace.request("read", path=path) for path in task.hidden_tests}
        for path, reply in tests.items():
            if "error" in reply:
                raise ValueError(f"{task.instance_id}: cannot read {path}: {reply['error']}")
        workspace.request("remove", paths=list(task.hidden_tests))
        client.api.commit(workspace._container.container.id, *tag.split(":"),
                          conf={"Cmd": ["/bin/true"], "WorkingDir": task.repo_dir})
    test_patch = "".join(_new_file(path, reply["content"]) for path, reply in tests.items())
    return {"instance_id": task.instance_id, "repo": task.package, "base_commit": task.sdist_sha256 or task.version,
            "version": task.version, "patch": task.gold_patch, "test_patch": test_patch,
            "FAIL_TO_PASS": json.dumps(list(task.fail_to_pass)), "PASS_TO_PASS": json.dumps(list(task.pass_to_pass)),
            "problem_statement": task.problem_statement, "image": tag, "repo_dir": task.repo_dir}


def _new_file(path: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    body = "".join("+" + line for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(text.splitlines())} @@\n{body}")


__all__ = ["REQUIRED", "from_swebench", "is_swebench_record", "load_swebench", "patched_files", "to_swebench"]
