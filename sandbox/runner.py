"""The untrusted side of a sandbox job: runs the model's program and nothing else.

Started by the judge (`harness.py`) as `python3 -I -B runner.py MODE REQ_FD RESP_FD`, as the
job user, in a fresh process. Nothing in here is trusted: the program it loads may rewrite
any of it. That is fine, because the runner only ever hands back *data* (the values that
functions returned, or bytes written to stdout), and the judge decides the verdict alone.
It never sees a test, an expected value or a comparison.

Modes:
  call    load the program, report its top-level names, then answer call requests
          `{"id", "fn", "args", "kwargs"}` with `{"id", "ok", "value" | "error"}`, one JSON
          line each. Values travel in the tagged encoding below.
  script  load the program as `__main__` with the real stdin/stdout (stdin/stdout tests).

Value encoding (shared with the judge, which decodes it strictly): JSON null, booleans,
ints, floats (NaN and infinities as JSON's extension), strings and lists stand for
themselves; every other value is an object `{"~": tag, "v": ...}` with tag tuple, dict
(a list of pairs), set, frozenset, bytes (hex), complex ([re, im]), type (a builtin type's
name, arguments only), ref (the name of a value that lives here, arguments only) or handle
(the index of an object kept here). Only values of these exact builtin types travel as
values (Counter, OrderedDict, defaultdict and namedtuples are sent as the dict or tuple they
hold); anything else, an `int` subclass whose `__eq__` lies included, stays here and the
judge sees an opaque handle that equals nothing and has no truth value.
"""

import builtins
import collections
import json
import sys

_MAX_DEPTH = 200


_DICTS = (collections.Counter, collections.OrderedDict, collections.defaultdict)
_handles = []  # objects that are not plain data stay here; the judge gets an opaque handle


def encode(value, depth=0):
    if depth > _MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple or (isinstance(value, tuple) and hasattr(kind, "_fields")):  # namedtuples as tuples
        return {"~": "tuple", "v": [encode(v, depth + 1) for v in tuple.__iter__(value)]}
    if kind is dict or kind in _DICTS:  # Counter == dict holds in Python too
        items = dict.items(value)
        return {"~": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in items]}
    if kind in (set, frozenset):
        return {"~": kind.__name__, "v": [encode(v, depth + 1) for v in value]}
    if kind is bytes:
        return {"~": "bytes", "v": value.hex()}
    if kind is complex:
        return {"~": "complex", "v": [value.real, value.imag]}
    _handles.append(value)
    return {"~": "handle", "v": len(_handles) - 1}


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


def _serve_calls(code, setup, namespace, requests, responses):
    try:
        exec(compile(code, "<solution>", "exec"), namespace)
        if setup:  # MBPP's test_setup_code builds inputs from the solution's own classes
            exec(compile(setup, "<setup>", "exec"), namespace)
        names = sorted(k for k in namespace if isinstance(k, str) and not k.startswith("__"))
        hello = {"loaded": True, "names": names}
    except BaseException as exc:  # the program's own failure, reported as data
        hello = {"loaded": False, "error": _describe(exc)}
    _send(responses, hello)
    for line in requests:
        request = json.loads(line)
        try:
            fn = namespace[request["fn"]]
            args = decode(request["args"], namespace)
            kwargs = dict(decode(request["kwargs"], namespace))
            reply = {"id": request["id"], "ok": True, "value": encode(fn(*args, **kwargs))}
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, MemoryError: all just data
            reply = {"id": request["id"], "ok": False, "error": _describe(exc)}
        _send(responses, reply)


def _send(stream, obj):
    stream.write(json.dumps(obj) + "\n")
    stream.flush()


def main():
    mode, req_fd, resp_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        with open("/proc/self/oom_score_adj", "w") as f:  # be the first to go when memory runs out
            f.write("1000")
    except OSError:
        pass
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    requests = open(req_fd, encoding="utf-8")
    responses = open(resp_fd, "w", encoding="utf-8")
    program = json.loads(requests.readline())
    code, setup = program["code"], program.get("setup", "")
    if mode == "script":
        requests.close()
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        try:
            exec(compile(code, "<solution>", "exec"), namespace)
        except SystemExit:
            raise
        except BaseException as exc:  # tells the judge about MemoryError; the verdict ignores it
            _send(responses, {"error": _describe(exc)})
            raise
        return
    namespace = {"__name__": "__solution__", "__builtins__": __builtins__}
    _serve_calls(code, setup, namespace, requests, responses)


if __name__ == "__main__":
    main()
