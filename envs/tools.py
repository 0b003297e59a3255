"""Tools for envs: a plain typed Python callable, described to the model by a JSON schema.

`tool_schema(fn)` reads the name, the docstring (first paragraph: the description; a Google
style `Args:` section: each parameter's description) and the signature (type hints give the
JSON types, parameters without a default are required), in the OpenAI/Hugging Face
`{"type": "function", "function": {...}}` form that chat templates take as `tools=`.

`render_chat(tokenizer, messages, tools)` renders a conversation for the model: through the
tokenizer's chat template with `tools=` when the template uses them, otherwise with the tools
described in the system message in this documented format (`tool_system_prompt`):

    You can call these tools:
    <tools>
    {"type": "function", "function": {"name": "python", ...}}
    </tools>
    To call a tool, write a JSON object inside <tool_call></tool_call> tags, for example:
    <tool_call>{"name": "python", "arguments": {"code": "print(2 ** 10)"}}</tool_call>
    The result comes back in a message from the tool.

`ToolUnavailable` is what a tool raises when its own infrastructure failed (a sandbox down), as
opposed to the model's arguments: the env then ends the episode as an infrastructure error.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any

_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array", dict: "object",
               tuple: "array"}


class ToolUnavailable(RuntimeError):
    """The tool's infrastructure failed (not the model's call): the episode is an infrastructure error."""


def _json_type(annotation: Any) -> dict[str, Any]:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_type(options[0]) if len(options) == 1 else {"anyOf": [_json_type(a) for a in options]}
    if origin is typing.Literal:
        values = list(typing.get_args(annotation))
        return {"type": _JSON_TYPES.get(type(values[0]), "string"), "enum": values}
    if origin in (list, tuple, set):
        args = typing.get_args(annotation)
        return {"type": "array", **({"items": _json_type(args[0])} if args and args[0] is not Ellipsis else {})}
    if origin is dict:
        return {"type": "object"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    raise TypeError(f"tool parameter type {annotation!r} has no JSON schema type")


def _doc_parts(fn: Callable) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a docstring with an optional `Args:` section."""
    doc = inspect.getdoc(fn) or ""
    parts = re.split(r"^(?:Args|Arguments|Parameters):\s*$", doc, maxsplit=1, flags=re.M)
    head, args = parts[0], parts[1] if len(parts) > 1 else ""
    description = " ".join(head.strip().split("\n\n")[0].split())
    params: dict[str, str] = {}
    name = None
    for line in args.splitlines():
        match = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if match and len(line) - len(line.lstrip()) <= 4:
            name = match.group(1)
            params[name] = match.group(2).strip()
        elif name and line.strip():
            params[name] += " " + line.strip()
        elif not line.strip() and params:
            name = None
    return description, params


def tool_schema(fn: Callable) -> dict[str, Any]:
    """The JSON schema of a typed callable, as chat templates take it in `tools=`."""
    if not callable(fn):
        raise TypeError(f"a tool must be callable, got {type(fn).__name__}")
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or type(fn).__name__
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else fn.__call__
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", name):
        raise ValueError(f"tool name {name!r} must be an identifier of at most 64 characters")
    description, param_docs = _doc_parts(target if target is not fn and target.__doc__ else fn)
    if not description:
        raise ValueError(f"tool {name!r} needs a docstring: it is the description the model reads")
    hints = typing.get_type_hints(target)
    properties: dict[str, Any] = {}
    required = []
    for pname, param in inspect.signature(target).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args and **kwargs cannot be described to a model")
        prop = _json_type(hints.get(pname, param.annotation))
        if pname in param_docs:
            prop["description"] = param_docs[pname]
        properties[pname] = prop
        if param.default is inspect.Parameter.empty:
            required.append(pname)
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


def tool_name(fn: Callable) -> str:
    return tool_schema(fn)["function"]["name"]


def tool_system_prompt(schemas: list[dict[str, Any]]) -> str:
    """The documented system-prompt description of the tools, for templates without `tools=`."""
    lines = ["You can call these tools:", "<tools>", *(json.dumps(s) for s in schemas), "</tools>",
             "To call a tool, write a JSON object inside <tool_call></tool_call> tags, for example:",
             _example(schemas[0]) if schemas else "",
             "The result comes back in a message from the tool."]
    return "\n".join(lines)


def _example(schema: dict[str, Any]) -> str:
    fn = schema["function"]
    if fn["name"] == "python":
        args: dict[str, Any] = {"code": "print(2 ** 10)"}
    else:
        samples = {"integer": 1, "number": 1.0, "string": "...", "boolean": True, "array": [], "object": {}}
        args = {k: samples.get(v.get("type"), "...") for k, v in fn["parameters"]["properties"].items()
                if k in fn["parameters"]["required"]}
    return "<tool_call>" + json.dumps({"name": fn["name"], "arguments": args}) + "</tool_call>"


def template_takes_tools(tokenizer) -> bool:
    """Whether the tokenizer's chat template renders a `tools` variable."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("tool_use") or template.get("default")
    return bool(template) and re.search(r"\btools\b", template) is not None


def with_tool_prompt(messages: list[dict], schemas: list[dict[str, Any]] | None,
                     tool_prompt: str | None = None) -> list[dict]:
    """`messages` with the tools described in the system message (a new one first if there is none):
    `tool_prompt` when given, else the documented `<tools>` block of `schemas`."""
    if not schemas and not tool_prompt:
        return [dict(m) for m in messages]
    text = tool_prompt or tool_system_prompt(schemas)
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{text}" if out[0]["content"] else text
    else:
        out.insert(0, {"role": "system", "content": text})
    return out


def render_chat(tokenizer, messages: list[dict], schemas: list[dict[str, Any]] | None = None, *,
                add_generation_prompt: bool = True, tool_prompt: str | None = None) -> str:
    """The conversation as the model reads it, its tools advertised by the template or the system prompt
    (`tool_prompt`, when the env's parser describes its own call format)."""
    if tool_prompt:
        return tokenizer.apply_chat_template(with_tool_prompt(messages, schemas, tool_prompt), tokenize=False,
                                             add_generation_prompt=add_generation_prompt)
    if schemas and template_takes_tools(tokenizer):
        return tokenizer.apply_chat_template(messages, tools=schemas, tokenize=False,
                                             add_generation_prompt=add_generation_prompt)
    if schemas:
        messages = with_tool_prompt(messages, schemas)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


__all__ = ["ToolUnavailable", "render_chat", "template_takes_tools", "tool_name", "tool_schema", "tool_system_prompt",
           "with_tool_prompt"]
