"""Unicode and HTML math spelled as LaTeX: `x ≥ 2`, `(−∞, 1) ∪ (3, ∞)`, `x<sup>2</sup>`, `x ＞ 1`.

Models trained on web text write math the way web pages do. Each symbol here has one LaTeX
spelling, so the later stages see one notation. The pass runs only on text that holds a
non-ASCII character, an HTML tag or an entity, and is a fixed number of linear scans.
"""

from __future__ import annotations

import html
import re

_SYMBOLS = {
    "\u2260": "\\ne ", "\u2265": "\\geq ", "\u2264": "\\leq ", "\u2267": "\\geq ", "\u2266": "\\leq ",
    "\u221e": "\\infty ", "\u222a": "\\cup ", "\u2229": "\\cap ", "\u03c0": "\\pi ", "\u2200": "\\forall ",
    "\u2203": "\\exists ", "\u221a": "\\sqrt", "\u00b1": "\\pm ", "\u2213": "\\mp ", "\u2208": "\\in ",
    "\u2209": "\\notin ", "\u2212": "-", "\u2013": "-", "\u00d7": "\\times ", "\u00f7": "\\div ",
    "\u00b7": "\\cdot ", "\u22c5": "\\cdot ", "\u2217": "*", "\u2205": "\\emptyset ", "\u2248": "\\approx ",
    "\u2223": "\\mid ", "\u2216": "\\setminus ", "\u03b8": "\\theta ", "\u03b1": "\\alpha ", "\u03b2": "\\beta ",
    "\u03bb": "\\lambda ", "\u03bc": "\\mu ", "\u03c6": "\\varphi ", "\u03c9": "\\omega ", "\u2102": "\\mathbb{C}",
    "\u2124": "\\mathbb{Z}", "\u2115": "\\mathbb{N}", "\u211a": "\\mathbb{Q}", "\u211d": "\\mathbb{R}",
    "\u2192": "\\to ", "\u27e8": "\\langle ", "\u27e9": "\\rangle ", "\u2032": "'", "\u3000": " ", "\u00a0": " ",
    "\u00bd": "\\frac{1}{2}", "\u00bc": "\\frac{1}{4}", "\u00be": "\\frac{3}{4}", "\u2153": "\\frac{1}{3}",
    "\u2154": "\\frac{2}{3}",
}
_SUPERSCRIPT = dict(zip("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207a\u207b\u207f",
                        "0123456789+-n"))
_SUBSCRIPT = dict(zip("\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089", "0123456789"))
_SUPER_RUN = re.compile("[" + "".join(_SUPERSCRIPT) + "]+")
_SUB_RUN = re.compile("[" + "".join(_SUBSCRIPT) + "]+")
_TABLE = {ord(k): v for k, v in _SYMBOLS.items()}
_TABLE.update({c: chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)})  # full-width ASCII: `＞` is `>`
_SCRIPT = re.compile(r"<(sup|sub)>([^<>]{0,200})</\1>", re.IGNORECASE)  # `x<sup>2</sup>` is `x^{2}`
_TAG = re.compile(r"</?(?:i|b|em|strong|span|var|math)(?:\s+[a-z-]+=\"[^\"<>]*\")*\s*>", re.IGNORECASE)
_ENTITY = re.compile(r"&#?\w{1,8};")


def to_latex(s: str) -> str:
    """`s` with Unicode math symbols, full-width characters, HTML tags and entities as LaTeX."""
    if "<" in s:
        s = _SCRIPT.sub(lambda m: ("^{" if m.group(1).lower() == "sup" else "_{") + m.group(2) + "}", s)
        s = _TAG.sub(" ", s)
    if "&" in s and _ENTITY.search(s):
        s = html.unescape(s)
    if s.isascii():
        return s
    s = _SUPER_RUN.sub(lambda m: "^{" + "".join(_SUPERSCRIPT[c] for c in m.group(0)) + "}", s)
    s = _SUB_RUN.sub(lambda m: "_{" + "".join(_SUBSCRIPT[c] for c in m.group(0)) + "}", s)
    return s.translate(_TABLE)

