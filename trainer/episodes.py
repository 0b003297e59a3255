"""Multi-turn episodes: what the episode loop (trainer/rollout.py) needs to know about an env's chat.

An env is multi-turn when `env.unwrapped.max_turns > 1` (`MultiTurnEnv`, `ToolEnv`). A turn ends
at an end-of-turn token, at `max_new_tokens`, or at the end of a tool call (`</tool_call>`, or what
the env's parser says in `call_ended`). The env's reply is appended exactly as the chat template
renders it after that turn (`env_tokens`): the template is applied to the conversation with the
assistant turn replaced by a sentinel, and what follows the sentinel is the env's part (the
end-of-turn token the model already sampled is not repeated).

An episode whose score is `error` (a tool's sandbox or another service failed, not the model)
is dropped from its group before advantages (`drop_errors`): it is no training signal, and the
trainer counts it in the `errors` metric.
"""

from __future__ import annotations

from rlvr.trainer.groups import Group

SENTINEL = "\u2063rlvr-turn\u2063"


def is_multiturn(env) -> bool:
    return getattr(env.unwrapped, "max_turns", 1) > 1


def render(tokenizer, messages: list[dict], env) -> str:
    """`messages` as the model reads them, the assistant turn opened, with `env`'s tools described as its
    parser wants."""
    from rlvr.envs.tools import render_chat

    unwrapped = getattr(env, "unwrapped", None)  # None: a plain chat
    return render_chat(tokenizer, messages, getattr(unwrapped, "tool_schemas", None) or None,
                       tool_prompt=getattr(unwrapped, "tool_prompt", None))


def call_ended(env):
    """The env parser's test for a turn that has just closed a tool call (Hermes `</tool_call>` by default,
    as for an env without a parser)."""
    from rlvr.envs.tool_calls import ends_with_call

    return getattr(getattr(env.unwrapped, "parser", None), "call_ended", ends_with_call)


def _end_marker(env) -> str:
    from rlvr.envs.tool_calls import CLOSE

    return getattr(getattr(env.unwrapped, "parser", None), "end_marker", CLOSE)


def env_tokens(tokenizer, messages: list[dict], env, sampled_eos: bool) -> list[int]:
    """Token ids the chat template puts after the last assistant turn of `messages` (the env's reply
    and the next assistant header), without the end-of-turn token when the model sampled it."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    marked = [*messages[:last], {"role": "assistant", "content": SENTINEL}, *messages[last + 1:]]
    text = render(tokenizer, marked, env)
    if text.count(SENTINEL) != 1:
        raise ValueError("the chat template does not render an assistant turn's content verbatim")
    tail = text.split(SENTINEL, 1)[1]
    eos_text = tokenizer.eos_token or ""
    if sampled_eos and eos_text and tail.startswith(eos_text):
        tail = tail[len(eos_text):]
    return tokenizer(tail, add_special_tokens=False)["input_ids"]


def bind_tokenizer(envs: list, tokenizer) -> None:
    """Let envs that count tokens (a ToolEnv's `max_tokens`) count them with the policy's tokenizer."""
    for env in envs:
        if hasattr(env.unwrapped, "count_tokens"):
            env.unwrapped.count_tokens = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def is_error(info: dict) -> bool:
    score = info.get("score") if isinstance(info, dict) else None
    return isinstance(score, dict) and score.get("reason") == "error"


def drop_errors(group: Group) -> Group:
    """The group without its `error` completions (infrastructure failures), which it counts in `errors`."""
    keep = [i for i, info in enumerate(group.infos) if not is_error(info)]
    if len(keep) == len(group.infos):
        return group

    def pick(values):
        return [values[i] for i in keep] if values else values

    return Group(group.index, group.prompt_ids, pick(group.completion_ids), pick(group.truncated), pick(group.texts),
                 pick(group.rewards), pick(group.infos), pick(group.sample_logps), weights=pick(group.weights),
                 errors=group.errors + len(group.infos) - len(keep))


def episode_metrics(groups: list[Group]) -> dict[str, float]:
    """Mean turns, tool calls and the share of context tokens of multi-turn groups (empty for single-turn)."""
    infos = [i for g in groups if g.weights is not None for i in g.infos]
    if not infos:
        return {}
    weights = [w for g in groups if g.weights is not None for ws in g.weights for w in ws]
    return {"turns_mean": sum(i.get("turns", 1) for i in infos) / len(infos),
            "tool_calls_mean": sum(i.get("tool_calls", 0) for i in infos) / len(infos),
            "env_token_frac": 1.0 - sum(weights) / len(weights) if weights else 0.0}
