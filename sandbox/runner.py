"""The untrusted side of a sandbox job: runs the model's program and nothing else.

`run(mode)` is the body of a runner process: forked by the harness's zygote (a process that
never saw a job), already the job user, with the program's stdin/stdout/stderr on fds 0-2,
requests from the judge on fd 3 and replies on fd 4. Nothing in here is trusted: the
program it loads may rewrite any of it. That is fine, because the runner only ever hands back *data* (the values
that functions returned, or bytes written to stdout), and the judge decides the verdict
alone. It never sees a test, an expected value or a comparison.

Modes:
  call    load the program, report its top-level names, then answer call requests
          `{"id", "fn", "args", "kwargs"}` with `{"id", "ok", "value" | "error"}`.
  script  load the program as `__main__` with the real stdin/stdout (stdin/stdout tests).

Wire: the judge sends length-prefixed `marshal` frames (trusted data); the runner answers
with JSON lines written by the small encoder below, which the judge parses strictly.

Value encoding: JSON null, booleans, ints, floats (NaN and infinities as JSON's extension),
strings and lists stand for themselves; every other value is an object `{"~": tag, "v": ...}`
with tag tuple, dict (a list of pairs), set, frozenset, bytes (hex), complex ([re, im]),
type (a builtin type's name, arguments only), ref (the name of a value that lives here,
arguments only) or handle (the index of an object kept here). Only values of these exact
builtin types travel as values (Counter, OrderedDict, defaultdict and namedtuples go as the
dict or tuple they hold); anything else, an `int` subclass whose `__eq__` lies included,
stays here and the judge sees an opaque handle that equals nothing and has no truth value.
"""

import builtins
import marshal
import os
import sys

_MAX_DEPTH = 200
_DICT_TYPES = ("Counter", "OrderedDict", "defaultdict")
_ESCAPES = {i: f"\\u{i:04x}" for i in [*range(32), *range(0xD800, 0xE000)]}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})
_handles = []  # objects that are not plain data stay here; the judge gets an opaque handle


def _plain_dict(value, kind):
    if kind is dict:
        return True
    collections = sys.modules.get("collections")
    return collections is not None and any(kind is getattr(collections, n, None) for n in _DICT_TYPES)


def encode(value, depth=0):
    """JSON text of `value` in the tagged encoding."""
    if depth > _MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        text = float.__repr__(value)
        return {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}.get(text, text)
    if kind is str:
        return '"' + str.translate(value, _ESCAPES) + '"'
    if kind is list:
        return "[" + ",".join(encode(v, depth + 1) for v in value) + "]"
    if kind is tuple or (isinstance(value, tuple) and hasattr(kind, "_fields")):  # namedtuples as tuples
        return _tagged("tuple", "[" + ",".join(encode(v, depth + 1) for v in tuple.__iter__(value)) + "]")
    if _plain_dict(value, kind):  # Counter == dict holds in Python too
        pairs = ",".join(f"[{encode(k, depth + 1)},{encode(v, depth + 1)}]" for k, v in dict.items(value))
        return _tagged("dict", "[" + pairs + "]")
    if kind is set or kind is frozenset:
        return _tagged(kind.__name__, "[" + ",".join(encode(v, depth + 1) for v in value) + "]")
    if kind is bytes:
        return _tagged("bytes", '"' + bytes.hex(value) + '"')
    if kind is complex:
        return _tagged("complex", f"[{encode(value.real)},{encode(value.imag)}]")
    _handles.append(value)
    return _tagged("handle", str(len(_handles) - 1))


def _tagged(tag, body):
    return '{"~":"' + tag + '","v":' + body + "}"


def decode(data, namespace):
    if isinstance(data, list):
        return [decode(v, namespace) for v in data]
    if not isinstance(data, dict):
        return data
    tag, body = data["~"], data["v"]
    if tag == "ref":
        return namespace[body]
    if tag == "handle":
        return _handles[body]
    if tag == "type":
        return getattr(builtins, body)
    if tag == "bytes":
        return bytes.fromhex(body)
    if tag == "complex":
        return complex(*body)
    items = [decode(v, namespace) for v in body]
    if tag == "dict":
        return dict(items)
    return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)


def _describe(exc):
    return f"{type(exc).__name__}: {exc}"[:500]


def _read_frame(fd):
    """One length-prefixed marshal frame from the judge, or None at EOF."""
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
    return '{"id":' + str(call_id) + ',"ok":false,"error":' + encode(payload) + "}"


def _serve_calls(code, setup, namespace, req_fd, resp_fd):
    try:
        exec(compile(code, "<solution>", "exec"), namespace)
        if setup:  # MBPP's test_setup_code builds inputs from the solution's own classes
            exec(compile(setup, "<setup>", "exec"), namespace)
        names = sorted(k for k in namespace if isinstance(k, str) and not k.startswith("__"))
        hello = '{"loaded":true,"names":' + encode(names) + "}"
    except BaseException as exc:  # the program's own failure, reported as data
        hello = '{"loaded":false,"error":' + encode(_describe(exc)) + "}"
    _send(resp_fd, hello)
    while True:
        request = _read_frame(req_fd)
        if request is None:
            return
        call_id = int(request["id"])
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


def run(mode, req_fd=3, resp_fd=4):
    """Load the program and serve the judge; returns when the judge hangs up (call mode) or
    the program ends (script mode). Exceptions of a script propagate, as in `python prog.py`."""
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    program = _read_frame(req_fd)
    code, setup = program["code"], program.get("setup", "")
    if mode == "script":
        os.close(req_fd)
        namespace = _module("__main__")
        try:
            exec(compile(code, "<solution>", "exec"), namespace)
        except SystemExit:
            raise
        except BaseException as exc:  # tells the judge about MemoryError; the verdict ignores it
            _send(resp_fd, '{"error":' + encode(_describe(exc)) + "}")
            raise
        return
    namespace = _module("__solution__")
    _serve_calls(code, setup, namespace, req_fd, resp_fd)

