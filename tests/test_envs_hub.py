"""Dataset envs after a plain `pip install`: no local copy, so the hub dataset by its common id.

No network here: each test builds a real `datasets` cache holding the hub ids
(`openai/gsm8k`, `HuggingFaceH4/MATH-500`) from records written here, and runs a fresh
Python with `HF_HUB_OFFLINE=1` and `HF_DATASETS_OFFLINE=1`, so `datasets` itself finds
them in its cache exactly as it would after one online run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets.packaged_modules.json.json import Json

GSM8K = [{"question": "Ann has 3 apples and buys 4 more. How many apples?", "answer": "3 + 4 = 7\n#### 7"},
         {"question": "A box holds 1,000 pins; how many in two boxes?", "answer": "2 * 1000\n#### 2,000"}]
MATH500 = [{"problem": "What is $1+1$?", "solution": "$\\boxed{2}$", "answer": "2", "subject": "Prealgebra",
            "level": 1, "unique_id": "test/prealgebra/1.json"}]


def cache_hub_dataset(cache: Path, hub_id: str, config: str, split: str, records: list[dict], tmp: Path) -> None:
    """Build `hub_id` (config, split) into the datasets cache at `cache`, as a download would leave it.

    A hub dataset lives in the cache under `<namespace>___<name>/<config>/<version>/<hash>/`;
    the json builder, given the dataset's name, writes the same files under `<name>/`, so
    the built folder is moved under the namespaced name.
    """
    namespace, name = hub_id.split("/")
    source = tmp / f"{name}-{split}.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    builder = Json(cache_dir=str(cache), dataset_name=name, config_name=config, config_id=config, hash="fixture",
                   data_files={split: str(source)})
    builder.download_and_prepare()
    built = Path(builder.cache_dir).relative_to(cache).parts[0]  # the name as datasets spells it in the cache
    (cache / built).rename(cache / f"{namespace}___{built}")


def run_offline(code: str, cache: Path, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "RLVR_DATA_DIR": str(data_dir), "HF_HOME": str(cache.parent / "hf_home")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def offline(tmp_path):
    cache, empty = tmp_path / "cache", tmp_path / "no_local_copies"
    cache.mkdir()
    empty.mkdir()
    return cache, empty


def test_dataset_envs_read_the_hub_dataset_from_the_datasets_cache(offline, tmp_path):
    cache, empty = offline
    cache_hub_dataset(cache, "openai/gsm8k", "main", "test", GSM8K, tmp_path)
    cache_hub_dataset(cache, "HuggingFaceH4/MATH-500", "default", "test", MATH500, tmp_path)
    out = run_offline(
        "import gymnasium as gym, rlvr.envs\n"
        "env = gym.make('rlvr/GSM8K-v0')\n"
        "print(env.unwrapped.source.size, [t.reference for t in env.unwrapped.source.tasks])\n"
        "env.reset(options={'index': 1})\n"
        "print(env.step('\\\\boxed{2000}')[1])\n"
        "math = gym.make('rlvr/MATH500-v0', difficulty=1)\n"
        "math.reset(seed=0)\n"
        "print(math.step('\\\\boxed{2}')[1])\n", cache, empty)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["2 ['7', '2000']", "1.0", "1.0"]


def test_a_local_copy_still_wins_over_the_hub(offline, tmp_path):
    cache, data = offline
    cache_hub_dataset(cache, "openai/gsm8k", "main", "test", GSM8K, tmp_path)
    (data / "gsm8k").mkdir()
    (data / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "#### 2"}) + "\n")
    out = run_offline("import gymnasium as gym, rlvr.envs\n"
                      "print(gym.make('rlvr/GSM8K-v0').unwrapped.source.size)", cache, data)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_no_local_copy_and_no_network_is_one_line_saying_how_to_point_at_a_file(offline):
    cache, empty = offline
    out = run_offline("import sys, gymnasium as gym, rlvr.envs\n"
                      "from rlvr.cli import main\n"
                      "sys.exit(main(['eval', '--env', 'rlvr/MATH-v0', '--policy', 'x:y']))", cache, empty)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "DigitalLearningGmbH/MATH-lighteval" in lines[0] and "path=FILE" in lines[0]
    assert "RLVR_DATA_DIR" in lines[0]
