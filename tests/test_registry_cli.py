"""Registry, entry-point plugins (a real metadata-provided plugin) and the CLI's success and error paths."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.registry import RegistryError, list_verifiers, make_verifier, register_verifier
from rlvr.verifiers import FinalBoxed, ThinkFormat


def run_cli(*args, env=None, stdin=None):
    """The installed `rlvr` entry point in a fresh process, as a user runs it."""
    cmd = [sys.executable, "-m", "rlvr", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, input=stdin, timeout=120)


def test_builtin_verifiers_are_registered_and_built():
    names = list_verifiers()
    for name in ["think_format", "soft_think_format", "tag_count", "boxed", "overlong", "repetition", "math", "code"]:
        assert name in names and names[name]
    assert isinstance(make_verifier("boxed"), FinalBoxed)
    assert make_verifier("think_format", answer_tags=True).answer_tags is True


def test_register_and_conflicts():
    register_verifier("test_think_strict", ThinkFormat, "a strict think check")
    assert isinstance(make_verifier("test_think_strict"), ThinkFormat)
    register_verifier("test_think_strict", ThinkFormat, "same target again is fine")
    with pytest.raises(RegistryError, match="already registered"):
        register_verifier("test_think_strict", FinalBoxed)
    register_verifier("test_think_strict", FinalBoxed, replace=True)
    assert isinstance(make_verifier("test_think_strict"), FinalBoxed)
    with pytest.raises(RegistryError, match="unknown verifier 'nope'"):
        make_verifier("nope")
    with pytest.raises(RegistryError):
        register_verifier("", ThinkFormat)


@pytest.fixture
def plugin_path(tmp_path):
    """A plugin 'installed' the way pip leaves one: a module plus a dist-info with entry points."""
    (tmp_path / "rlvr_demo_plugin.py").write_text(textwrap.dedent('''
        from rlvr.registry import register_verifier
        from rlvr.verifiers import Score, Verifier, completion_text

        class Shouty(Verifier):
            name = "shouty"
            def score(self, completion, reference=None, **fields):
                text = completion_text(completion)
                return Score(1.0) if text and text.isupper() else Score(0.0, "format")

        def register():
            register_verifier("shouty", Shouty, "1 when the completion is all caps")
    '''))
    dist = tmp_path / "rlvr_demo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rlvr-demo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rlvr.plugins]\ndemo = rlvr_demo_plugin:register\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return env


def test_entry_point_plugin_is_discovered(plugin_path):
    listed = run_cli("list", env=plugin_path)
    assert listed.returncode == 0, listed.stderr
    assert "shouty" in listed.stdout and "all caps" in listed.stdout
    ok = run_cli("verify", "shouty", "--completion", "HELLO", "--json", env=plugin_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["score"] == 1.0
    no = run_cli("verify", "shouty", "--completion", "hello", "--json", env=plugin_path)
    assert json.loads(no.stdout)["reason"] == "format"


def test_broken_plugin_is_named_in_one_line(plugin_path, tmp_path):
    dist = tmp_path / "rlvr_demo_plugin-0.1.dist-info"
    (dist / "entry_points.txt").write_text("[rlvr.plugins]\nbroken = rlvr_demo_plugin:missing\n")
    out = run_cli("list", env=plugin_path)
    assert out.returncode == 2
    assert "plugin 'broken'" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_verify_text_and_json(capsys):
    assert main(["verify", "boxed", "--completion", "\\boxed{1} \\boxed{2}"]) == 0
    out = capsys.readouterr().out
    assert "score: 0" in out and "reason: hedge" in out
    assert main(["verify", "think_format", "-o", "answer_tags=true", "-c",
                 "<think>x</think><answer>1</answer>", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 1.0


def test_cli_verify_from_file_and_stdin(tmp_path):
    f = tmp_path / "completion.txt"
    f.write_text("<think>ok</think> \\boxed{7}")
    out = run_cli("verify", "boxed", "--completion-file", str(f), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["info"]["answer"] == "7"
    out = run_cli("verify", "boxed", "-f", "-", "--json", stdin="\\boxed{8}")
    assert json.loads(out.stdout)["info"]["answer"] == "8"


def test_cli_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "verifiers:" in out and "think_format" in out and "envs:" in out
    assert main(["list", "--json"]) == 0
    assert "math" in json.loads(capsys.readouterr().out)["verifiers"]


@pytest.mark.parametrize("args,fragment", [
    ([], "required"),
    (["verify"], "required"),
    (["verify", "boxed"], "one of the arguments"),
    (["verify", "boxed", "-c", "x", "-f", "y"], "not allowed with"),
    (["verify", "nope", "-c", "x"], "unknown verifier 'nope'"),
    (["verify", "boxed", "-f", "/no/such/file"], "No such file"),
    (["verify", "boxed", "-c", "x", "--field", "novalue"], "KEY=VALUE"),
    (["verify", "boxed", "-c", "x", "-o", "bogus=1"], "bogus"),
    (["frobnicate"], "invalid choice"),
    (["list", "--bogus"], "unrecognized arguments"),
])
def test_cli_mistakes_give_one_line_and_exit_2(args, fragment):
    out = run_cli(*args)
    assert out.returncode == 2
    assert fragment in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_console_script_is_installed():
    script = Path(sys.executable).with_name("rlvr")
    assert script.exists()
    out = subprocess.run([str(script), "verify", "boxed", "-c", "\\boxed{3}"], capture_output=True, text=True)
    assert out.returncode == 0 and "score: 1" in out.stdout
