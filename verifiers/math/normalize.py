"""LaTeX normalisation: one canonical spelling for answers that differ only in typography.

Two answers whose normal forms are equal are equal, so this is the cheapest stage of the
grader; later stages parse the normal form. Everything here is a fixed sequence of linear
string passes (no backtracking regex over unbounded repetition), so it is safe to run in
the caller's process on any input that passed the length cap.
"""

from __future__ import annotations

import functools
import re

from rlvr.verifiers.boxes import match_brace
from rlvr.verifiers.math.unicode_math import to_latex

# Spacing and sizing commands that carry no meaning.
_DROP = (
    "\\displaystyle", "\\textstyle", "\\scriptstyle", "\\left", "\\right", "\\bigl", "\\bigr", "\\Bigl",
    "\\Bigr", "\\biggl", "\\biggr", "\\Biggl", "\\Biggr", "\\big", "\\Big", "\\bigg", "\\Bigg", "\\middle",
    "\\limits", "\\nolimits",
)
_SPACES = ("\\qquad", "\\quad", "\\!", "\\,", "\\;", "\\:", "\\>", "\\ ", "~", "\\hspace", "\\enspace")
_RENAME = {
    "\\dfrac": "\\frac", "\\tfrac": "\\frac", "\\cfrac": "\\frac",
    "\\leqslant": "\\leq", "\\geqslant": "\\geq",
    "\\lbrace": "\\{", "\\rbrace": "\\}", "\\lbrack": "[", "\\rbrack": "]", "\\lvert": "|", "\\rvert": "|",
    "\\vert": "|", "\\lt": "<", "\\backslash": "\\setminus", "\\smallsetminus": "\\setminus", "\\gt": ">", "\\neq": "\\ne", "\\to": "\\rightarrow",
    "\\bmatrix": "bmatrix", "\\tiny": "", "\\infin": "\\infty", "\\dots": "\\ldots", "\\cdots": "\\ldots",
    ">=": "\\geq ", "<=": "\\leq ", "!=": "\\ne ", "\\geqq": "\\geq", "\\leqq": "\\leq",
    "\u2212": "-", "\u00d7": "\\times", "\u00b7": "\\cdot", "\u2264": "\\leq", "\u2265": "\\geq",
    "\u221e": "\\infty", "\u03c0": "\\pi", "\u221a": "\\sqrt", "\u00bd": "\\frac{1}{2}",
}
_DEGREES = ("^{\\circ}", "^\\circ", "^{\\degree}", "\\degree", "\u00b0", "{}^\\circ", "\\circ")
# Font and wrapper commands whose argument is kept: \mathrm{cm} -> cm.
_UNWRAP = ("\\mathrm", "\\textbf", "\\textit", "\\mathbf", "\\mathit", "\\boldsymbol", "\\bm", "\\mathsf",
           "\\textrm", "\\operatorname", "\\mbox", "\\textnormal", "\\text", "\\emph", "\\mathbb")
_UNIT_WORDS = frozenset("""
cm m km mm meter meters metre metres centimeter centimeters kilometer kilometers inch inches in ft foot feet
yard yards mile miles mi mph kg g gram grams kilogram kilograms pound pounds lb lbs ounce ounces oz
second seconds sec s minute minutes min hour hours hr hrs h day days week weeks month months year years
dollar dollars cent cents unit units square sq cubic degree degrees deg radian radians rad
liter liters litre litres l ml gallon gallons cup cups point points people students kmh kph
""".split())

_NOT_UNITS = frozenset({"sin", "cos", "tan", "log", "exp", "and", "or"})
_FRAC_SHORT = re.compile(r"\\frac\s*(\d)\s*(\d)")  # \frac12
_FRAC_HALF = re.compile(r"\\frac\s*(\{[^{}]*\})\s*(\d)")  # \frac{1}2
_FRAC_FIRST = re.compile(r"\\frac\s*(\d)\s*(\{)")  # \frac1{2}
_SQRT_SHORT = re.compile(r"\\sqrt\s*(\d|[a-zA-Z](?![a-zA-Z]))")  # \sqrt2
_DOTS = re.compile(r"\\dot\{?(\d)\}?(\d*)\\dot\{?(\d)\}?")  # 0.\dot{1}4\dot{2}: the period 142
_DOT = re.compile(r"\\dot\{?(\d)\}?")
_SETS = {"\\varnothing": "\\emptyset", "\\{\\}": "\\emptyset", "\u2205": "\\emptyset", "\\mathbb{R}": "(-\\infty,\\infty)",
         "\\mathbb R": "(-\\infty,\\infty)", "\\R ": "(-\\infty,\\infty)", "\u211d": "(-\\infty,\\infty)",
         "\\text{all real numbers}": "(-\\infty,\\infty)", "\\text{All real numbers}": "(-\\infty,\\infty)"}
_ONE_CHAR_GROUP = re.compile(r"([\^_])\{\s*(\w)\s*\}")
# `\sin 45^\circ`, `\cos(60^{\circ})`: degrees inside a trig function are an angle, not a number
_TRIG_DEGREES = re.compile(r"\\(sin|cos|tan|sec|csc|cot)\s*[({]?\s*(-?\d+(?:\.\d+)?)\s*\^\s*\{?\s*\\circ\s*\}?\s*[)}]?")
_LONE_VARIABLE = re.compile(r"\s*[a-zA-Z](?:_\{?\w+\}?)?\s*")
_LE_GE = re.compile(r"\\[lg]e(?![a-zA-Z])")
_MOD = re.compile(r"\\pmod\s*\{[^{}]*\}|\\(?:bmod|mod)\s*\d+|\(\s*\\mod\s*\d+\s*\)")
_ANSWER_PREFIX = re.compile(r"^\s*(?:\\text\{\s*)?(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*\}?\s*", re.IGNORECASE)
_CELSIUS = re.compile(r"\^\s*\{?\\circ\}?\s*(?:\\(?:text|mathrm)\s*\{\s*[CF]\s*\}|[CF](?![a-zA-Z]))")
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?\.?")
# `33.5 percent`, `12 pct`, `7 per cent`, `\text{ percent}`: the word is the sign, not a unit to drop
_PERCENT_WORD = re.compile(r"(?<=[\d}])\s*(?:\\(?:text|mathrm|mbox|textnormal)\s*\{\s*)?"
                           r"(?:percent(?:age)?|per\s*cent|pct)\.?\s*\}?\s*$", re.IGNORECASE)
# Python-style functions: `sqrt(3)`, `abs(x)`, `exp(2)`, `sin(x)`; not `\sqrt` and not inside a word
_PY_FUNCTION = re.compile(r"(?<![A-Za-z\\])(sqrt|abs|exp|sin|cos|tan|ln)\s*\(")
_PY_PI = re.compile(r"(?<![A-Za-z\\])pi(?![A-Za-z])")
_COMMAND_AFTER = re.compile(r"(\\+)([A-Za-z()])")
_ROW = "\x00"
_OVER = re.compile(r"\\over(?![a-zA-Z])")
_SPACE_RUN = re.compile(r"\s+")
_SPACE_AROUND = re.compile(r"\s*([^\w\\\s])\s*")
_TRAILING_UNIT = re.compile(r"^(.*(?:[\d}).]|\\pi))\s*(?:\\(?:text|mbox|mathrm|textnormal|textrm|textit|textbf|mathit)\{)?\s*([a-zA-Z]+(?:\s+[a-zA-Z]+|\s*/\s*[a-zA-Z]+)?)\s*\}?(\^[23]|\^\{[23]\})?$")


def strip_math_delimiters(s: str) -> str:
    """Remove `$`, `\\(`, `\\[` and their closers around (and inside) an answer."""
    for token in ("$$", "$", "\\(", "\\)", "\\[", "\\]"):
        if token == "$" and "\\$" in s:
            s = s.replace("\\$", "")
        s = s.replace(token, " ") if token not in ("\\[", "\\]") else _strip_display(s, token)
    return s.strip()


def _strip_display(s: str, token: str) -> str:
    # `\[` opens display math, but `\\[2pt]` is a row break with spacing: only drop a bare `\[`.
    out, i = [], 0
    while True:
        j = s.find(token, i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        if j > 0 and s[j - 1] == "\\":
            out.append(s[i:j + 2])
        else:
            out.append(s[i:j] + " ")
        i = j + 2


def unwrap(s: str, command: str) -> str:
    """Replace every `command{arg}` by `arg` (brace matched, nested arguments kept)."""
    out, i = [], 0
    while True:
        j = s.find(command, i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        k = j + len(command)
        if k < len(s) and s[k].isalpha():  # a longer command name
            out.append(s[i:k])
            i = k
            continue
        while k < len(s) and s[k] == " ":
            k += 1
        if k < len(s) and s[k] == "{":
            end = match_brace(s, k)
            if end > 0:
                out.append(s[i:j] + " " + s[k + 1:end] + " ")
                i = end + 1
                continue
        out.append(s[i:k])
        i = k


def undouble_backslashes(s: str) -> str:
    """`\\\\frac{1}{5}` -> `\\frac{1}{5}`: text that was JSON-escaped twice, where every command has two
    backslashes and none has one (a `\\\\` row break before a letter in ordinary LaTeX leaves the
    text alone, since its other commands have one backslash). Every backslash run is halved."""
    if "\\\\" not in s:
        return s
    runs = {len(m.group(1)) for m in _COMMAND_AFTER.finditer(s)}
    if 2 not in runs or 1 in runs:
        return s
    return re.sub(r"\\+", lambda m: "\\" * max(1, len(m.group(0)) // 2), s)


def python_math(s: str) -> str:
    """`sqrt(3)` -> `\\sqrt{3}`, `abs(x)` -> `|x|`, `exp(1)` -> `\\exp(1)`, `pi` -> `\\pi` (`**` is
    handled by the caller). One linear pass with a stack of open parentheses; text whose
    parentheses do not balance is left as written."""
    if "pi" in s:
        s = _PY_PI.sub(r"\\pi ", s)
    calls = {m.end() - 1: m for m in _PY_FUNCTION.finditer(s)} if "(" in s else {}
    if not calls or s.count("(") != s.count(")"):
        return s
    out, closers, i = [], [], 0
    for k, ch in enumerate(s):
        if ch == "(":
            m = calls.get(k)
            if m is None:
                out.append(s[i:k + 1])
                closers.append(")")
            else:
                name = m.group(1)
                out.append(s[i:m.start()] + ("\\sqrt{" if name == "sqrt" else "|" if name == "abs" else f"\\{name}("))
                closers.append("}" if name == "sqrt" else "|" if name == "abs" else ")")
            i = k + 1
        elif ch == ")":
            if not closers:
                return s
            out.append(s[i:k] + closers.pop())
            i = k + 1
    return "".join(out) + s[i:]


def normalize(s: str) -> str:
    """The canonical spelling of an answer (a LaTeX string without the `\\boxed{}`).

    Short strings are cached: the reference of a group, and repeated answers, are
    normalised once."""
    if _PLAIN_NUMBER.fullmatch(s):
        return s.rstrip(".")
    return _normalize_cached(s) if len(s) <= 256 else _normalize(s)


def _normalize(s: str) -> str:
    if not s.isascii() or "<" in s or "&" in s:
        s = to_latex(s)
    s = _full_stop(strip_math_delimiters(undouble_backslashes(s)))
    if s.startswith("**") and s.endswith("**") and len(s) > 4:  # markdown bold around the answer
        s = s[2:-2]
    s = s.replace("**", "^")  # a Python power
    s = python_math(s)
    s = s.replace("\\%", "%").replace("{,}", "").replace("\\{,\\}", "")
    s = re.sub(r"(\d),\s*\\!\s*(?=\d{3})", r"\1,", s)  # `11,\! 111`: a thousands separator
    s = s.replace("\\left.", " ").replace("\\right.", " ")  # invisible delimiters
    for token in _DROP:
        s = _drop_command(s, token)
    s = s.replace("\\\\", _ROW)  # a row break, not the spacing command `\ `
    for token in _SPACES:
        s = s.replace(token, " ")
    s = s.replace(_ROW, "\\\\")
    for old, new in _RENAME.items():
        s = s.replace(old, new)
    s = _OVER.sub("/", s)
    s = _LE_GE.sub(lambda m: m.group(0) + "q", s)
    s = _MOD.sub("", s)
    s = _ANSWER_PREFIX.sub("", s)
    s = _CELSIUS.sub("", s)
    s = _DOTS.sub(lambda m: "\\overline{" + m.group(1) + m.group(2) + m.group(3) + "}", s)
    s = _DOT.sub(r"\\overline{\1}", s)
    for token, canonical in _SETS.items():
        s = s.replace(token, canonical)
    s = _TRIG_DEGREES.sub(lambda m: f"\\{m.group(1)}(\\frac{{{m.group(2)}\\pi}}{{180}})", s)
    for token in _DEGREES:
        s = s.replace(token, "")
    if "\\approx" in s:  # `x = 1/3 \approx 0.33`: the exact part stands; `x \approx 11`: the value
        left, right = s.split("\\approx", 1)
        s = right.split("\\approx")[0] if _LONE_VARIABLE.fullmatch(left) or not left.strip() else left
    s = _PERCENT_WORD.sub("%", s)
    s = _strip_units(s)
    for command in _UNWRAP:
        if command in s:
            s = unwrap(s, command)
    if "st" in s or "nd" in s or "rd" in s or "th" in s:
        s = _ORDINAL.sub("", s)  # `12^{th}`, `15th`: the number
    if "\\in" in s or "integer" in s:
        s = _drop_qualifier(s)
    s = _strip_units(s)  # again: `\text{18 eggs}` shows its unit only once unwrapped
    s = s.replace("\\$", "").replace("$", "")
    s = _FRAC_SHORT.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_HALF.sub(r"\\frac\1{\2}", s)
    s = _FRAC_FIRST.sub(r"\\frac{\1}\2", s)
    s = _SQRT_SHORT.sub(r"\\sqrt{\1}", s)
    s = _ONE_CHAR_GROUP.sub(r"\1\2", s)  # x^{2} -> x^2, a_{1} -> a_1
    s = _SPACE_RUN.sub(" ", s).strip()
    if _looks_like_number(s):  # `1,000,000`, `11,\! 111` and `1 000`: one number
        s = s.replace(",", "").replace(" ", "")
    s = _full_stop(s)
    while s.endswith((",", ";", "\\\\")):
        s = s[:-2].rstrip() if s.endswith("\\\\") else s[:-1].rstrip()
    return _SPACE_AROUND.sub(r"\1", s)


_normalize_cached = functools.lru_cache(maxsize=1 << 15)(_normalize)


# `12^{th}`, `12^\\text{th}` (unwrapped by now), `15th`, `2nd`: an ordinal suffix after a digit
_ORDINAL = re.compile(r"(?<=\d)(?:\s*\^\s*\{\s*(?:st|nd|rd|th)\s*\}|\s*\^\s*(?:st|nd|rd|th)|(?:st|nd|rd|th))(?![A-Za-z])")
# `x = k\pi, k \in \mathbb{Z}`, `n\pi \text{ for any integer } n`, `2k, where k is an integer`: the range
# of the parameter, said after the answer
_INTEGERS = r"(?:Z|N|\\mathbb\s*\{?\s*[ZN]\s*\}?)(?:\s*\^\s*\{?\s*\+\s*\}?|\s*_\s*\{?\s*(?:\\geq\s*0|0|\+)\s*\}?)?"
_QUALIFIER = re.compile(
    r"\s*[,;]?\s*\(?\s*(?:(?:for|where|with)\s+)?(?:(?:all|any|every|some)\s+)?(?:"
    rf"(?<![A-Za-z\\\\])(?P<vars>[a-zA-Z](?:\s*,\s*[a-zA-Z])*)\s*(?:\\in\s*{_INTEGERS}|(?:is|are)\s+(?:an?\s+|any\s+)?"
    r"(?:(?:positive|nonnegative|non-negative)\s+)?integers?)"
    r"|(?:(?:positive|nonnegative|non-negative)\s+)?integers?\s+(?P<var>[a-zA-Z]))\s*\)?\s*$")


def _drop_qualifier(s: str) -> str:
    """The answer without a final statement of its parameter's range (`, k \\in \\mathbb{Z}`), when the
    parameter is used in what remains."""
    s = _SPACE_RUN.sub(" ", s)  # one space at most between tokens: the pattern's optional spaces stay linear
    m, tries = _QUALIFIER.search(s), 3
    while m and tries:  # `2\\pi k, k \\in Z`: the list of names may start inside the answer
        rest = s[:m.start()]
        names = re.findall(r"[a-zA-Z]", m.group("vars") or m.group("var"))
        if rest.strip() and all(re.search(rf"(?<![A-Za-z\\]){n}(?![A-Za-z])", rest) for n in names):
            return rest
        m, tries = _QUALIFIER.search(s, m.start() + 1), tries - 1
    return s


def _full_stop(s: str) -> str:
    """Drop a sentence's final period (not an ellipsis: `0.333...`) and a stray final backslash."""
    s = s.rstrip()
    if s.endswith("\\") and not s.endswith("\\\\"):
        s = s[:-1].rstrip()
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1].rstrip()
    return s


def _drop_command(s: str, token: str) -> str:
    """Remove `token` where it is a whole command (`\\left` but not `\\leftarrow`)."""
    if token not in s:
        return s
    parts = s.split(token)
    out = [parts[0]]
    for part in parts[1:]:
        if part[:1].isalpha():
            out.append(token + part)
        else:
            out.append(part)
    return "".join(out)


def _looks_like_number(s: str) -> bool:
    """True when `s` is a single number with thousands separators (`1,234,567.5`, `1 000`), not a list."""
    t = s.strip().lstrip("-+")
    return bool(re.fullmatch(r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?", t) or re.fullmatch(r"[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?", t))


def _strip_units(s: str) -> str:
    """Drop a trailing unit after a number: `5 \\text{ cm}`, `12 dollars`, `3\\mbox{ m}^2`."""
    m = _TRAILING_UNIT.match(s.strip())
    if not m:
        return s
    words = m.group(2).lower().replace("/", " ").split()
    number = re.sub(r"\\[a-zA-Z]+", "", m.group(1))  # `2\sqrt{3} cm`: commands are not letters here
    if re.search(r"[a-zA-Z]", number):
        return s
    if all(w in _UNIT_WORDS for w in words):
        return m.group(1)
    if re.fullmatch(r"[-+]?[\d.,]+", number.strip()) and all(len(w) > 2 and w not in _NOT_UNITS for w in words):
        return m.group(1)  # `15 apples`: a count of things
    return s


def text_key(s: str) -> str:
    """A case- and spacing-insensitive key for short text answers."""
    s = normalize(s)
    s = s.replace("{", "").replace("}", "").replace("\\", "")
    return re.sub(r"[\s.]+", "", s).lower()
