"""Chat rendering: an env's conversation as the model reads it, and the env's reply as tokens.

The env's tools are described as its parser wants (`rlvr.envs.tools.render_chat`). The env's reply
is appended exactly as the chat template renders it after the assistant turn (`env_tokens`): the
template is applied to the conversation with the assistant turn replaced by a sentinel, and what
follows the sentinel is the env's part (the end-of-turn token the model already sampled is not
repeated). Nothing sampled is ever re-encoded.
"""

from __future__ import annotations

SENTINEL = "\u2063rlvr-turn\u2063"


def env_tools(env) -> tuple[list[dict] | None, str | None]:
    """`env`'s tool schemas (None: no tools) and its parser's own description of them (None: the documented
    `<tools>` format, or a chat template's `tools=`)."""
    unwrapped = getattr(env, "unwrapped", None)
    return getattr(unwrapped, "tool_schemas", None) or None, getattr(unwrapped, "tool_prompt", None)


def render(tokenizer, messages: list[dict], env) -> str:
    """`messages` as the model reads them, the assistant turn opened, with `env`'s tools described as its
    parser wants (`env` None: a plain chat): the template's `tools=` where it takes them, else the system
    message of `tool_messages`."""
    from rlvr.envs.tools import render_chat

    schemas, own = env_tools(env)
    return render_chat(tokenizer, messages, schemas, tool_prompt=own)


def tool_messages(messages: list[dict], env) -> list[dict]:
    """`messages` with `env`'s tools described in the system message as its parser wants: what a message
    generator (a text policy, a served model) is sent, as a token generator's chat renders it."""
    from rlvr.envs.tools import with_tool_prompt

    schemas, own = env_tools(env)
    return with_tool_prompt(messages, schemas, own)


def encode_chats(tokenizer, prompts: list[list[dict]]) -> list[list[int]]:
    """Token ids of each chat prompt with the chat template and the assistant turn opened."""
    texts = [tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) for messages in prompts]
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


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


def eos_ids(tokenizer, model) -> list[int]:
    """Every token id that ends a turn: the tokenizer's EOS and the model's generation EOS ids."""
    extra = getattr(model.generation_config, "eos_token_id", None)
    ids = {tokenizer.eos_token_id, *(extra if isinstance(extra, (list, tuple)) else [extra])}
    return sorted(i for i in ids if i is not None)
