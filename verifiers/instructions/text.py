"""Counting words, sentences and upper-case words without NLTK or downloaded data.

IFEval's reference checks count words with the regular expression `\\w+`, sentences with
NLTK's pre-trained Punkt model and upper-case words over NLTK's Treebank tokens. Punkt's
English model has to be downloaded, which a reward running on a cluster node cannot rely
on, so `count_sentences` applies Punkt's decisions as rules: a token ending in `?` or `!`
ends a sentence; one ending in a period does too, unless it is a known abbreviation, an
initial, or a number or ellipsis followed by a lower-case word.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")
_CLOSERS = "\"')]}\u201d\u2019*"
# Abbreviations that do not end a sentence (lower case, without the final period).
ABBREVIATIONS = frozenset("""
mr mrs ms dr prof sr jr st mt ft vs etc inc ltd co corp dept univ assn bros gen gov sen rep col lt sgt capt
cmdr adm maj jan feb apr jun jul aug sep sept oct nov dec tues thur thurs
nos vol vols fig figs approx dist ave blvd hwy pp sec e.g i.e a.m p.m u.s u.k u.n u.s.a
cf viz ca
""".split())
# Words that Punkt's English model has seen starting sentences often enough to break after an abbreviation.
_STARTERS = frozenset("the it this that these those they we he she i but and so then there however in a an".split())


def count_words(text: str) -> int:
    """Runs of word characters (letters, digits, underscore), as IFEval counts words."""
    return len(_WORD.findall(text))


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, by Punkt-style rules over whitespace-separated tokens."""
    tokens = text.split()
    sentences: list[str] = []
    start = 0
    for i, token in enumerate(tokens[:-1]):
        if _ends_sentence(token, tokens[i + 1]):
            sentences.append(" ".join(tokens[start:i + 1]))
            start = i + 1
    if start < len(tokens):
        sentences.append(" ".join(tokens[start:]))
    return sentences


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


def _ends_sentence(token: str, following: str) -> bool:
    core = token.rstrip(_CLOSERS)
    if not core:
        return False
    if core[-1] in "?!":
        return True
    if core[-1] != ".":
        return False
    next_lower = following.lstrip(_CLOSERS + "(\u201c\u2018")[:1].islower()
    if core.endswith(".."):  # an ellipsis ends a sentence only before a capitalised word
        return not next_lower and following[:1].isalpha()
    word = core[:-1].lstrip("\"'(\u201c\u2018").lower()
    if word in ABBREVIATIONS or re.fullmatch(r"(?:[a-z]\.)+[a-z]", word):
        return following.lower().strip(_CLOSERS) in _STARTERS
    if re.fullmatch(r"[a-z]", word):  # an initial, as in "J. Smith"
        return False
    if re.fullmatch(r"[\d.,:]+", word):  # a number: "in 1999. The ..." breaks, "page 5. and" does not
        return not next_lower
    return True


_SPLIT = re.compile(r"(\.\.\.|--|[;@#$%&?!,()\[\]{}<>\"`\u201c\u201d])")
_CONTRACTION = re.compile(r"(?i)^(.+?)(n't|'s|'re|'ve|'ll|'d|'m)$")


def word_tokens(text: str) -> list[str]:
    """Treebank-style tokens: punctuation and clitics ("n't", "'s") split off, inner periods kept."""
    out: list[str] = []
    for chunk in text.split():
        for piece in _SPLIT.split(chunk):
            if not piece:
                continue
            if piece.endswith(".") and len(piece) > 1 and "." not in piece[:-1]:
                out.extend((piece[:-1], "."))
                continue
            match = _CONTRACTION.match(piece)
            out.extend(match.groups() if match else (piece,))
    return out


def count_upper_words(text: str) -> int:
    """Tokens written entirely in capitals ("NASA", "DON'T" counts as "DO" and "N'T")."""
    return sum(token.isupper() for token in word_tokens(text))
