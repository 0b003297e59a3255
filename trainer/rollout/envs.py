"""What the episode loop needs to know about an env, through the env API alone.

An env is multi-turn when `env.unwrapped.max_turns > 1` (`MultiTurnEnv`, `ToolEnv`). A multi-turn
turn ends at an end-of-turn token, at `max_new_tokens`, or at the end of a tool call: the env
parser's `end_marker` (`</tool_call>` by default) is a stop string, and its `call_ended` says
whether a turn's text has just closed a call. An env's own `stop` strings end a turn where they
are first written (a code answer at its closing fence). Single-turn completions are scored in one batch
(`score`): `env.unwrapped.score_group(texts)`, or `rlvr.envs.score_groups` for a batch of rlvr envs.
"""

from __future__ import annotations


def make_envs(env_id: str, kwargs: dict, count: int) -> list:
    """`count` instances of an env (rlvr envs register on import of rlvr.envs)."""
    import gymnasium as gym

    if env_id.startswith(("rlvr/", "rg/")):
        import rlvr.envs  # noqa: F401  (registers the rlvr/ and reasoning-gym rg/ ids)
    return [gym.make(env_id, **kwargs) for _ in range(count)]


def score(envs: list, texts: list[list[str]]) -> list[list[tuple[float, dict]]]:
    """(reward, info) for every completion of every env's current prompt, as one batch where possible."""
    if envs and all(type(e.unwrapped).__module__.startswith("rlvr.envs") for e in envs):
        from rlvr.envs import score_groups

        return score_groups(envs, texts)
    return [e.unwrapped.score_group(t) for e, t in zip(envs, texts)]


def is_multiturn(env) -> bool:
    return getattr(env.unwrapped, "max_turns", 1) > 1


def call_ended(env):
    """The env parser's test for a turn that has just closed a tool call (Hermes `</tool_call>` by default,
    as for an env without a parser)."""
    from rlvr.envs.tool_calls import ends_with_call

    return getattr(getattr(env.unwrapped, "parser", None), "call_ended", ends_with_call)


def call_parser(env):
    """The env's tool-call parser (Hermes `<tool_call>` JSON for an env without one)."""
    from rlvr.envs.tool_calls import HermesParser

    return getattr(env.unwrapped, "parser", None) or HermesParser()


def end_marker(env) -> str:
    """What a turn that has just closed a call ends with: the stop string the loop sends every generator."""
    from rlvr.envs.tool_calls import CLOSE

    return getattr(getattr(env.unwrapped, "parser", None), "end_marker", CLOSE)


def stop_strings(env) -> tuple[str, ...]:
    """The env's own stop strings (`TaskEnv(stop=...)`): a turn ends where it first writes one."""
    return tuple(getattr(env.unwrapped, "stop", ()))


def bind_tokenizer(envs: list, tokenizer) -> None:
    """Let envs that count tokens (a ToolEnv's `max_tokens`) count them with the policy's tokenizer."""
    for env in envs:
        if hasattr(env.unwrapped, "count_tokens"):
            env.unwrapped.count_tokens = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
