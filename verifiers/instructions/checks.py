"""The 25 instruction checks of IFEval, by their IFEval ids.

Each check takes the response text and the instruction's arguments (IFEval's argument
names) and returns None when the response follows the instruction, else a short reason
a person can read. `CHECKS` maps each id to its check and the arguments it requires.
Counting relations are IFEval's: `"less than"` (strictly fewer) and `"at least"`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

from rlvr.verifiers.instructions.text import count_sentences, count_upper_words, count_words

LESS_THAN = "less than"
AT_LEAST = "at least"
RELATIONS = (LESS_THAN, AT_LEAST)
CONSTRAINED_ANSWERS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
TWO_RESPONSES_SEPARATOR = "******"
PARAGRAPH_SEPARATOR = "***"


class LanguageUnknown(Exception):
    """The response has no text a language could be detected from."""


def _relation(count: int, relation: str, target: int, what: str) -> str | None:
    if relation == LESS_THAN:
        return None if count < target else f"{count} {what}, needs fewer than {target}"
    return None if count >= target else f"{count} {what}, needs at least {target}"


@functools.lru_cache(maxsize=4096)
def detect_language(text: str) -> str:
    """The ISO 639-1 code of `text`'s language (langdetect, seeded, so repeatable; cached, as it is slow)."""
    from langdetect import DetectorFactory, detect
    from langdetect.lang_detect_exception import LangDetectException

    DetectorFactory.seed = 0
    try:
        return detect(text)
    except LangDetectException as exc:
        raise LanguageUnknown(str(exc)) from None


# --- keywords ------------------------------------------------------------------------


def keywords_existence(text: str, *, keywords: list[str]) -> str | None:
    missing = [k for k in keywords if not re.search(re.escape(k), text, re.I)]
    return f"missing keyword(s): {', '.join(missing)}" if missing else None


def keyword_frequency(text: str, *, keyword: str, frequency: int, relation: str) -> str | None:
    count = len(re.findall(re.escape(keyword), text, re.I))  # substrings, case-insensitive, as IFEval
    return _relation(count, relation, frequency, f"occurrence(s) of {keyword!r}")


def forbidden_words(text: str, *, forbidden_words: list[str]) -> str | None:
    used = [w for w in forbidden_words if re.search(r"\b" + re.escape(w) + r"\b", text, re.I)]
    return f"uses forbidden word(s): {', '.join(used)}" if used else None


def letter_frequency(text: str, *, letter: str, let_frequency: int, let_relation: str) -> str | None:
    count = text.lower().count(letter.lower())
    return _relation(count, let_relation, let_frequency, f"letter(s) {letter!r}")


def response_language(text: str, *, language: str) -> str | None:
    try:
        found = detect_language(text)
    except LanguageUnknown:
        return None  # nothing to judge a language by: IFEval counts it as followed
    return None if found == language else f"written in {found!r}, not {language!r}"


# --- length --------------------------------------------------------------------------


def number_sentences(text: str, *, num_sentences: int, relation: str) -> str | None:
    return _relation(count_sentences(text), relation, num_sentences, "sentence(s)")


def number_words(text: str, *, num_words: int, relation: str) -> str | None:
    return _relation(count_words(text), relation, num_words, "word(s)")


def number_paragraphs(text: str, *, num_paragraphs: int) -> str | None:
    parts = re.split(r"\s?\*\*\*\s?", text)
    for i, part in enumerate(parts):
        if not part.strip() and 0 < i < len(parts) - 1:
            return f"empty paragraph {i + 1} between '{PARAGRAPH_SEPARATOR}' dividers"
    count = sum(1 for i, part in enumerate(parts) if part.strip() or 0 < i < len(parts) - 1)
    return None if count == num_paragraphs else f"{count} paragraph(s), needs exactly {num_paragraphs}"


def nth_paragraph_first_word(text: str, *, num_paragraphs: int, nth_paragraph: int,
                             first_word: str) -> str | None:
    parts = text.split("\n\n")
    count = sum(1 for part in parts if part.strip())
    if nth_paragraph > count:
        return f"only {count} paragraph(s), no paragraph {nth_paragraph}"
    paragraph = parts[nth_paragraph - 1].strip()
    if not paragraph:
        return f"paragraph {nth_paragraph} is empty"
    word = paragraph.split()[0].lstrip("'").lstrip('"')
    word = re.split(r"[.,?!'\"]", word, maxsplit=1)[0].lower()
    if count != num_paragraphs:
        return f"{count} paragraph(s), needs exactly {num_paragraphs}"
    return None if word == first_word.lower() else f"paragraph {nth_paragraph} starts with {word!r}, not {first_word!r}"


# --- content and format --------------------------------------------------------------


def number_placeholders(text: str, *, num_placeholders: int) -> str | None:
    count = len(re.findall(r"\[.*?\]", text))
    return None if count >= num_placeholders else f"{count} [placeholder](s), needs at least {num_placeholders}"


def postscript(text: str, *, postscript_marker: str) -> str | None:
    lowered = text.lower()
    if postscript_marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif postscript_marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + re.escape(postscript_marker.lower()) + r".*$"
    return None if re.search(pattern, lowered, re.M) else f"no postscript starting with {postscript_marker!r}"


def number_bullet_lists(text: str, *, num_bullets: int) -> str | None:
    count = len(re.findall(r"^\s*\*[^*].*$", text, re.M)) + len(re.findall(r"^\s*-.*$", text, re.M))
    return None if count == num_bullets else f"{count} bullet point(s), needs exactly {num_bullets}"


def constrained_response(text: str) -> str | None:
    stripped = text.strip()
    if any(option in stripped for option in CONSTRAINED_ANSWERS):
        return None
    return "does not contain one of: " + " / ".join(CONSTRAINED_ANSWERS)


def number_highlighted_sections(text: str, *, num_highlights: int) -> str | None:
    spans = re.findall(r"\*[^\n*]*\*", text) + re.findall(r"\*\*[^\n*]*\*\*", text)
    count = sum(1 for span in spans if span.strip("*").strip())
    return None if count >= num_highlights else f"{count} *highlighted* section(s), needs at least {num_highlights}"


def multiple_sections(text: str, *, section_spliter: str, num_sections: int) -> str | None:
    count = len(re.split(r"\s?" + re.escape(section_spliter) + r"\s?\d+\s?", text)) - 1
    return None if count >= num_sections else f"{count} '{section_spliter} N' section(s), needs {num_sections}"


def json_format(text: str) -> str | None:
    body = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        if body.startswith(fence):
            body = body[len(fence):]
            break
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    return None


def title(text: str) -> str | None:
    titles = re.findall(r"<<[^\n]+>>", text)
    return None if any(t.lstrip("<").rstrip(">").strip() for t in titles) else "no <<title>>"


def two_responses(text: str) -> str | None:
    parts = text.split(TWO_RESPONSES_SEPARATOR)
    kept = []
    for i, part in enumerate(parts):
        if part.strip():
            kept.append(part.strip())
        elif 0 < i < len(parts) - 1:
            return f"an empty response between '{TWO_RESPONSES_SEPARATOR}' separators"
    if len(kept) != 2:
        return f"{len(kept)} response(s) separated by '{TWO_RESPONSES_SEPARATOR}', needs 2"
    return "the two responses are the same" if kept[0] == kept[1] else None


def repeat_prompt(text: str, *, prompt_to_repeat: str) -> str | None:
    if text.strip().lower().startswith(prompt_to_repeat.strip().lower()):
        return None
    return "does not start by repeating the request word for word"


def end_checker(text: str, *, end_phrase: str) -> str | None:
    if text.strip().strip('"').lower().endswith(end_phrase.strip().lower()):
        return None
    return f"does not end with {end_phrase!r}"


def quotation(text: str) -> str | None:
    stripped = text.strip()
    ok = len(stripped) > 1 and stripped[0] == '"' and stripped[-1] == '"'
    return None if ok else "not wrapped in double quotation marks"


# --- case and punctuation ------------------------------------------------------------


def capital_word_frequency(text: str, *, capital_frequency: int, capital_relation: str) -> str | None:
    return _relation(count_upper_words(text), capital_relation, capital_frequency, "all-capital word(s)")


def _english_in_case(text: str, upper: bool) -> str | None:
    if not (text.isupper() if upper else text.islower()):
        return f"not all {'capital' if upper else 'lower-case'} letters"
    try:
        found = detect_language(text)
    except LanguageUnknown:
        return None
    return None if found == "en" else f"written in {found!r}, not English"


def english_capital(text: str) -> str | None:
    return _english_in_case(text, upper=True)


def english_lowercase(text: str) -> str | None:
    return _english_in_case(text, upper=False)


def no_comma(text: str) -> str | None:
    return f"{text.count(',')} comma(s)" if "," in text else None


# id -> (check, {argument: type}). Types: int, str, list (of str), "relation".
CHECKS: dict[str, tuple[Callable[..., str | None], dict[str, Any]]] = {
    "keywords:existence": (keywords_existence, {"keywords": list}),
    "keywords:frequency": (keyword_frequency, {"keyword": str, "frequency": int, "relation": "relation"}),
    "keywords:forbidden_words": (forbidden_words, {"forbidden_words": list}),
    "keywords:letter_frequency": (letter_frequency, {"letter": str, "let_frequency": int, "let_relation": "relation"}),
    "language:response_language": (response_language, {"language": str}),
    "length_constraints:number_sentences": (number_sentences, {"num_sentences": int, "relation": "relation"}),
    "length_constraints:number_paragraphs": (number_paragraphs, {"num_paragraphs": int}),
    "length_constraints:number_words": (number_words, {"num_words": int, "relation": "relation"}),
    "length_constraints:nth_paragraph_first_word": (
        nth_paragraph_first_word, {"num_paragraphs": int, "nth_paragraph": int, "first_word": str}),
    "detectable_content:number_placeholders": (number_placeholders, {"num_placeholders": int}),
    "detectable_content:postscript": (postscript, {"postscript_marker": str}),
    "detectable_format:number_bullet_lists": (number_bullet_lists, {"num_bullets": int}),
    "detectable_format:constrained_response": (constrained_response, {}),
    "detectable_format:number_highlighted_sections": (number_highlighted_sections, {"num_highlights": int}),
    "detectable_format:multiple_sections": (multiple_sections, {"section_spliter": str, "num_sections": int}),
    "detectable_format:json_format": (json_format, {}),
    "detectable_format:title": (title, {}),
    "combination:two_responses": (two_responses, {}),
    "combination:repeat_prompt": (repeat_prompt, {"prompt_to_repeat": str}),
    "startend:end_checker": (end_checker, {"end_phrase": str}),
    "startend:quotation": (quotation, {}),
    "change_case:capital_word_frequency": (
        capital_word_frequency, {"capital_frequency": int, "capital_relation": "relation"}),
    "change_case:english_capital": (english_capital, {}),
    "change_case:english_lowercase": (english_lowercase, {}),
    "punctuation:no_comma": (no_comma, {}),
}


def check_arguments(instruction_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments of one instruction, validated: a bad task raises ValueError, naming what is wrong."""
    if instruction_id not in CHECKS:
        raise ValueError(f"unknown instruction {instruction_id!r}")
    spec = CHECKS[instruction_id][1]
    kwargs = {k: v for k, v in (kwargs or {}).items() if v is not None}
    unknown = set(kwargs) - set(spec)
    missing = set(spec) - set(kwargs)
    if unknown or missing:
        raise ValueError(f"{instruction_id}: missing {sorted(missing)}, unknown {sorted(unknown)}")
    for name, kind in spec.items():
        value = kwargs[name]
        ok = (value in RELATIONS if kind == "relation"
              else isinstance(value, list) and all(isinstance(v, str) for v in value) if kind is list
              else isinstance(value, int) and not isinstance(value, bool) and value >= 0 if kind is int
              else isinstance(value, str) and value != "")
        if not ok:
            raise ValueError(f"{instruction_id}: bad {name} {value!r}")
    if instruction_id.endswith("nth_paragraph_first_word") and not 1 <= kwargs["nth_paragraph"]:
        raise ValueError(f"{instruction_id}: nth_paragraph must be at least 1")
    return kwargs
