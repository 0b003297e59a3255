"""SWE-bench-schema records through rlvr/RepoFix-v0 and the grader: records made from rlvr's own generated
tasks (an image with the bug in and the FAIL_TO_PASS tests out, a test_patch that adds them back), since no
dataset hub can be reached here."""

from __future__ import annotations

import json

import pytest
from test_repo_env import call, tasks  # noqa: F401  (the module fixture: catalogue tasks, images built)

from rlvr.envs.repo_env import RepoFixEnv, RepoTasks, repo_tasks
from rlvr.envs.repo_swebench import from_swebench, is_swebench_record, to_swebench

RECORD = {"instance_id": "acme__w-1", "repo": "acme/w", "base_commit": "abc", "problem_statement": "x is wrong",
          "patch": "diff --git a/w/core.py b/w/core.py\n--- a/w/core.py\n+++ b/w/core.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
                   "--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-a\n+b\n",
          "test_patch": "", "FAIL_TO_PASS": ["t.py::a"], "PASS_TO_PASS": '["t.py::b", "t.py::c"]', "image": "img:{instance_id}"}


def test_records_in_swebench_schema_map_onto_repo_tasks():
    task = from_swebench(RECORD)
    assert (task.fail_to_pass, task.pass_to_pass) == (("t.py::a",), ("t.py::b", "t.py::c"))
    assert task.image == "img:acme__w-1" and task.repo_dir == "/testbed" and task.source == "swebench"
    assert task.source_paths == ("w/", "setup.py") and task.setup_patch == "" and task.gold_patch == RECORD["patch"]
    assert task.extra["base_commit"] == "abc" and task.content_hash == task.compute_hash()
    assert from_swebench({**RECORD, "FAIL_TO_PASS": '["t.py::a"]', "image": None}, image="x").image == "x"
    assert is_swebench_record(RECORD) and not is_swebench_record({"instance_id": "x"})
    for bad, message in (({k: v for k, v in RECORD.items() if k != "patch"}, "missing patch"),
                         ({**RECORD, "image": ""}, "no image"), ({**RECORD, "FAIL_TO_PASS": "[]"}, "empty"),
                         ({**RECORD, "PASS_TO_PASS": "not json"}, "neither a list")):
        with pytest.raises(ValueError, match=message):
            from_swebench(bad)


@pytest.fixture(scope="module")
def records(tasks, tmp_path_factory):  # noqa: F811
    out = [to_swebench(task) for task in tasks[:2]]
    path = tmp_path_factory.mktemp("swe") / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return out, path


def test_exported_records_keep_the_schema_and_hide_the_tests(records, tasks):  # noqa: F811
    out, path = records
    assert all(isinstance(r["FAIL_TO_PASS"], str) and json.loads(r["FAIL_TO_PASS"]) for r in out)
    loaded = repo_tasks(str(path))
    assert [t.instance_id for t in loaded] == [t.instance_id for t in tasks[:2]]
    assert all(t.source == "swebench" and t.setup_patch == "" and t.test_patch for t in loaded)
    assert loaded[0].fail_to_pass == tasks[0].fail_to_pass and loaded[0].gold_patch == tasks[0].gold_patch


def test_swebench_records_play_in_repofix_gold_one_empty_zero_tests_hidden(records):
    _, path = records
    env = RepoFixEnv(RepoTasks(repo_tasks(str(path))), max_turns=6)
    env.reset(options={"index": 0})
    task = env.repo_task
    hidden = sorted({t.split("::")[0] for t in task.fail_to_pass})
    obs, *_ = env.step(call("bash", command=f"ls {' '.join(hidden)}"))
    assert "No such file" in obs[-1]["content"]  # the test_patch's files are not in the workspace
    obs, *_ = env.step(call("run_tests", selector=task.fail_to_pass[0]))
    assert "not found" in obs[-1]["content"] or "no tests ran" in obs[-1]["content"], obs[-1]["content"]
    patch = task.gold_patch.replace("'", "'\"'\"'")
    obs, *_ = env.step(call("bash", command=f"printf '%s' '{patch}' > /tmp/fix.diff && git apply /tmp/fix.diff"))
    obs, reward, terminated, truncated, info = env.step(call("submit"))
    assert (reward, terminated, info["correct"]) == (1.0, True, True), info
    assert set(info["score"]["info"]["correct"]["tests"]) == set(task.fail_to_pass + task.pass_to_pass)
    env.reset(options={"index": 1})
    obs, reward, terminated, truncated, info = env.step("no idea")
    assert (reward, info["score"]["reason"]) == (0.0, "tests_failed"), info
    env.close()
