"""The untrusted side of a sandbox job: runs the model's program and nothing else.

`run(mode)` is the body of a runner process: forked by the harness's zygote (a process that
never saw a job), already the job user, with the program's stdin/stdout/stderr on fds 0-2,
requests from the tester on fd 3 and replies on fd 4. Nothing in here is trusted: the
program it loads may rewrite any of it. That is fine, because the runner only ever hands back *data* (the values
that functions returned, or bytes written to stdout), and the tester decides the verdict
alone. It never sees a test, an expected value or a comparison.

Modes:
  call    load the program, report its top-level names, then answer call requests
          `{"id", "fn", "args", "kwargs"}` with `{"id", "ok", "value" | "error"}`.
  script  load the program as `__main__` with the real stdin/stdout (stdin/stdout tests).
  exec    write the given files and exec the given argv: a compiler, or a compiled program
          (stdin/stdout tests in other languages; see `languages.py`).

Wire: the tester sends length-prefixed `marshal` frames (trusted data); the runner answers
with JSON lines written by the small encoder below, which the tester parses strictly.

Value encoding: a value is a flat JSON list of tokens in prefix order, so that neither side
recurses and a value nests as deep as the interpreter lets the program build it. JSON null,
booleans, ints, floats (NaN and infinities as JSON's extension) and strings stand for
themselves; `{"~": tag, "n": count}` opens a list, tuple, set, frozenset or dict whose
`count` items (a dict's keys and values alternating) follow; `{"~": tag, "v": ...}` is a
bytes (hex), complex ([re, im]), type (a builtin type's name, arguments only), ref (the
name of a value that lives here, arguments only) or handle (the index of an object kept here). Only values of these exact
builtin types travel as values (Counter, OrderedDict, defaultdict and namedtuples go as the
dict or tuple they hold); anything else, an `int` subclass whose `__eq__` lies included,
stays here and the tester sees an opaque handle that equals nothing and has no truth value.
"""

import builtins
import marshal
import os
import sys

_MAX_TOKENS = 2_000_000  # a cyclic value would otherwise never end (the tester takes 16 MB at most)
_DICT_TYPES = ("Counter", "OrderedDict", "defaultdict")
_ESCAPES = {i: f"\\u{i:04x}" for i in [*range(32), *range(0xD800, 0xE000)]}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})
_handles = []  # objects that are not plain data stay here; the tester gets an opaque handle


def _plain_dict(value, kind):
    if kind is dict:
        return True
    collections = sys.modules.get("collections")
    return collections is not None and any(kind is getattr(collections, n, None) for n in _DICT_TYPES)


def _text(value):
    return '"' + str.translate(value, _ESCAPES) + '"'


def _float(value):
    text = float.__repr__(value)
    return {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}.get(text, text)


_SCALARS = {int: int.__repr__, str: _text, float: _float, bool: lambda v: "true" if v else "false",
            type(None): lambda v: "null"}


def encode(value):
    """JSON text of `value` as flat tokens in prefix order (no recursion, so no depth limit)."""
    parts, todo, budget = [], [value], _MAX_TOKENS
    append, pop, scalars = parts.append, todo.pop, _SCALARS
    while todo:
        value = pop()
        kind = type(value)
        scalar = scalars.get(kind)
        if scalar is not None:
            append(scalar(value))
            continue
        if kind is list or kind is tuple or (isinstance(value, tuple) and hasattr(kind, "_fields")):
            items = list(list.__iter__(value) if kind is list else tuple.__iter__(value))
            append(_head("list" if kind is list else "tuple", len(items)))  # namedtuples as tuples
        elif _plain_dict(value, kind):  # Counter == dict holds in Python too
            pairs = list(dict.items(value))
            append(_head("dict", len(pairs)))
            items = [x for pair in pairs for x in pair]
        elif kind is set or kind is frozenset:
            items = list(value)
            append(_head(kind.__name__, len(items)))
        elif kind is bytes:
            append(_leaf("bytes", '"' + bytes.hex(value) + '"'))
            continue
        elif kind is complex:
            append(_leaf("complex", f"[{_float(value.real)},{_float(value.imag)}]"))
            continue
        else:
            _handles.append(value)
            append(_leaf("handle", str(len(_handles) - 1)))
            continue
        budget -= len(items) + 1
        if budget < 0:
            raise ValueError("value too large (or cyclic)")
        items.reverse()
        todo.extend(items)
    return "[" + ",".join(parts) + "]"


def _head(tag, count):
    return '{"~":"' + tag + '","n":' + str(count) + "}"


def _leaf(tag, body):
    return '{"~":"' + tag + '","v":' + body + "}"


def decode(tokens, namespace):
    """The tester's arguments from flat tokens (trusted data; no recursion)."""
    stack, result = [], None
    for token in tokens:
        if type(token) is dict:
            tag = token["~"]
            if "n" in token:
                count = token["n"] * (2 if tag == "dict" else 1)
                if count:
                    stack.append([tag, count, []])
                    continue
                value = _build(tag, [])
            else:
                value = _argument_leaf(tag, token["v"], namespace)
        else:
            value = token
        while stack:
            frame = stack[-1]
            frame[2].append(value)
            frame[1] -= 1
            if frame[1]:
                break
            stack.pop()
            value = _build(frame[0], frame[2])
        else:
            result = value
    return result


def _build(tag, items):
    if tag == "dict":
        return dict(zip(items[0::2], items[1::2]))
    return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)


def _argument_leaf(tag, body, namespace):
    if tag == "ref":
        return namespace[body]
    if tag == "handle":
        return _handles[body]
    if tag == "type":
        return getattr(builtins, body)
    if tag == "bytes":
        return bytes.fromhex(body)
    return complex(*body)


def _describe(exc):
    return f"{type(exc).__name__}: {exc}"[:500]


def _read_frame(fd):
    """One length-prefixed marshal frame from the tester, or None at EOF."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, int.from_bytes(head, "big"))
    return None if body is None else marshal.loads(body)


def _read_exact(fd, n):
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _send(fd, text):
    data = (text + "\n").encode("utf-8")
    while data:
        data = data[os.write(fd, data):]


def _reply(call_id, ok, payload):
    if ok:
        return '{"id":' + str(call_id) + ',"ok":true,"value":' + payload + "}"
    return '{"id":' + str(call_id) + ',"ok":false,"error":' + _text(payload) + "}"


def _serve_calls(code, setup, namespace, req_fd, resp_fd):
    try:
        exec(compile(code, "<solution>", "exec"), namespace)
        if setup:  # MBPP's test_setup_code builds inputs from the solution's own classes
            exec(compile(setup, "<setup>", "exec"), namespace)
        names = sorted(k for k in namespace if isinstance(k, str) and not k.startswith("__"))
        hello = '{"loaded":true,"names":[' + ",".join(_text(n) for n in names) + "]}"
    except BaseException as exc:  # the program's own failure, reported as data
        hello = '{"loaded":false,"error":' + _text(_describe(exc)) + "}"
    _send(resp_fd, hello)
    while True:
        request = _read_frame(req_fd)
        if request is None:
            return
        call_id = int(request["id"])
        limit = request.get("rl")
        if type(limit) is int and limit > sys.getrecursionlimit():  # the tests raised theirs: one
            sys.setrecursionlimit(limit)  # interpreter would share it with the solution
        try:
            fn = namespace[request["fn"]]
            args = decode(request["args"], namespace)
            kwargs = dict(decode(request["kwargs"], namespace))
            reply = _reply(call_id, True, encode(fn(*args, **kwargs)))
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, MemoryError: all just data
            reply = _reply(call_id, False, _describe(exc))
        _send(resp_fd, reply)


def _module(name):
    """A fresh module in `sys.modules` for the program, so pickling its functions works
    (multiprocessing) as it does for `python prog.py`."""
    module = type(sys)(name)
    module.__builtins__ = builtins
    sys.modules[name] = module
    return module.__dict__


def _exec(program, req_fd, resp_fd):
    """Write the job's files into the work directory and become the compiler or the program."""
    os.close(req_fd)
    os.close(resp_fd)
    for name, text in program.get("files", {}).items():
        with open(name, "w", encoding="utf-8") as f:
            f.write(text)
    os.environ.update(program.get("env", {}))
    try:
        os.execvp(program["argv"][0], program["argv"])
    except OSError as exc:
        os.write(2, f"rlvr sandbox: cannot run {program['argv'][0]}: {exc}\n".encode())
        os._exit(127)


def run(mode, req_fd=3, resp_fd=4):
    """Load the program and serve the tester; returns when the tester hangs up (call mode) or
    the program ends (script mode). Exceptions of a script propagate, as in `python prog.py`."""
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    program = _read_frame(req_fd)
    if mode == "exec":
        _exec(program, req_fd, resp_fd)
    code, setup = program["code"], program.get("setup", "")
    if mode == "script":
        os.close(req_fd)
        namespace = _module("__main__")
        try:
            exec(compile(code, "<solution>", "exec"), namespace)
        except SystemExit:
            raise
        except BaseException as exc:  # tells the tester about MemoryError; the verdict ignores it
            _send(resp_fd, '{"error":' + _text(_describe(exc)) + "}")
            raise
        return
    namespace = _module("__solution__")
    _serve_calls(code, setup, namespace, req_fd, resp_fd)

