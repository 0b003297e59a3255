"""Instruction following: a writing request with one to three IFEval-style instructions attached.

Each item combines a writing form and a topic of this module's own with `difficulty`
instructions (1-3) drawn from the 25 IFEval types with random arguments, leaving out
pairs that cannot both hold (all capitals and all lower case, French and an English end
phrase, two layouts). The reference is the list of instructions, scored by the
`instructions` verifier (strict by default; `mode="loose"`, `partial=True` for partial credit).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from rlvr.envs.tasks import Generator

FORMS = ["a short blog post", "a letter to a neighbour", "a product description", "a travel diary entry",
         "a short story", "a plain-language explainer", "a toast for a small party", "a newsletter column",
         "a museum placard", "a radio announcement"]
TOPICS = ["night ferries between small islands", "repairing an old bicycle", "keeping bees on a city roof",
          "a lighthouse that is being automated", "the first frost in an orchard", "learning to read tide tables",
          "a library that lends tools", "baking bread at high altitude", "a chess club in a laundromat",
          "mapping the stars from a balcony", "a bus route that crosses three valleys", "restoring a canal lock",
          "a choir that sings in a train station", "growing tomatoes on a windowsill", "the sound of a glacier",
          "a weather balloon launched by students", "mending fishing nets", "a town that repaints its benches",
          "a pottery class for retired sailors", "following a river from its source"]
WORDS = ["lantern", "harbor", "compass", "thread", "meadow", "ember", "granite", "ribbon", "whistle", "orchard",
         "copper", "pebble", "signal", "window", "saddle", "thistle"]
LANGUAGES = {"fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese", "sw": "Swahili",
             "fi": "Finnish", "pl": "Polish"}
END_PHRASES = ["Is there anything else I can help with?", "That is all for today.", "Thank you for reading."]
SECTION_WORDS = ["Section", "PART", "Chapter"]


def _relation(rng: random.Random) -> str:
    return rng.choice(["less than", "at least"])


def _words(rng):
    relation = _relation(rng)
    n = rng.choice([80, 120, 150, 200, 300]) if relation == "less than" else rng.choice([30, 50, 80, 120])
    return {"num_words": n, "relation": relation}, f"Answer with {relation} {n} words."


def _sentences(rng):
    relation = _relation(rng)
    n = rng.randint(4, 10) if relation == "less than" else rng.randint(2, 6)
    return {"num_sentences": n, "relation": relation}, f"Your response should contain {relation} {n} sentences."


def _paragraphs(rng):
    n = rng.randint(2, 5)
    return {"num_paragraphs": n}, (f"Write exactly {n} paragraphs and separate them with the markdown divider ***"
                                   " on its own line.")


def _nth_paragraph(rng):
    n = rng.randint(2, 4)
    nth = rng.randint(1, n)
    word = rng.choice(WORDS)
    return {"num_paragraphs": n, "nth_paragraph": nth, "first_word": word}, (
        f"Write exactly {n} paragraphs, separated by a blank line (two new lines). Paragraph {nth} must begin "
        f"with the word \"{word}\".")


def _keywords(rng):
    keywords = rng.sample(WORDS, rng.randint(1, 3))
    return {"keywords": keywords}, f"Use the word(s) {', '.join(keywords)} somewhere in your response."


def _frequency(rng):
    word, relation = rng.choice(WORDS), _relation(rng)
    n = rng.randint(2, 4)
    return {"keyword": word, "frequency": n, "relation": relation}, (
        f"The word \"{word}\" should appear {relation} {n} times.")


def _forbidden(rng):
    words = rng.sample(["very", "really", "just", "thing", "amazing", "nice", "good", "things"], 2)
    return {"forbidden_words": words}, f"Do not use the words {' or '.join(words)}."


def _letters(rng):
    letter, relation = rng.choice("bcdfgkmpwyz"), _relation(rng)
    n = rng.randint(3, 12)
    return {"letter": letter, "let_frequency": n, "let_relation": relation}, (
        f"The letter '{letter}' should appear {relation} {n} times in your response.")


def _language(rng):
    code = rng.choice(sorted(LANGUAGES))
    return {"language": code}, f"Write your entire response in {LANGUAGES[code]}; no other language is allowed."


def _placeholders(rng):
    n = rng.randint(1, 4)
    return {"num_placeholders": n}, (f"Leave at least {n} placeholder(s) for the reader to fill in, written in "
                                     "square brackets like [street name].")


def _postscript(rng):
    marker = rng.choice(["P.S.", "P.P.S"])
    return {"postscript_marker": marker}, f"End with a postscript that starts with {marker}"


def _bullets(rng):
    n = rng.randint(2, 5)
    return {"num_bullets": n}, (f"Include exactly {n} bullet points in markdown, each on its own line starting "
                                "with '* '. No other lines may start with '*' or '-'.")


def _highlights(rng):
    n = rng.randint(1, 4)
    return {"num_highlights": n}, f"Highlight at least {n} part(s) with markdown, like *this important part*."


def _sections(rng):
    word, n = rng.choice(SECTION_WORDS), rng.randint(2, 4)
    return {"section_spliter": word, "num_sections": n}, (
        f"Organise the response into {n} sections, each starting with a line '{word} X' where X is its number.")


def _title(rng):
    return {}, "Give your response a title wrapped in double angle brackets, like <<a title here>>."


def _two_responses(rng):
    return {}, "Give two different responses, separated by a line of six asterisks: ******"


def _end(rng):
    phrase = rng.choice(END_PHRASES)
    return {"end_phrase": phrase}, f"Finish your response with the exact phrase \"{phrase}\" and nothing after it."


def _quotation(rng):
    return {}, "Wrap your entire response in double quotation marks."


def _capital_words(rng):
    relation = _relation(rng)
    n = rng.randint(2, 6) if relation == "at least" else rng.randint(3, 8)
    return {"capital_frequency": n, "capital_relation": relation}, (
        f"Words written in ALL CAPITAL LETTERS should appear {relation} {n} times.")


def _capitals(rng):
    return {}, "Write your entire response in English, in capital letters only."


def _lowercase(rng):
    return {}, "Write your entire response in English, in lower-case letters only; no capital letters at all."


def _no_comma(rng):
    return {}, "Do not use any commas anywhere in your response."


def _json(rng):
    return {}, "Format your entire output as JSON; you may wrap it in a ```json code block."


def _constrained(rng):
    return {}, ("Then end the discussion with a verdict: answer with one of the following options: "
                "\"My answer is yes.\", \"My answer is no.\", \"My answer is maybe.\"")


MAKERS: dict[str, Callable[[random.Random], tuple[dict[str, Any], str]]] = {
    "length_constraints:number_words": _words,
    "length_constraints:number_sentences": _sentences,
    "length_constraints:number_paragraphs": _paragraphs,
    "length_constraints:nth_paragraph_first_word": _nth_paragraph,
    "keywords:existence": _keywords,
    "keywords:frequency": _frequency,
    "keywords:forbidden_words": _forbidden,
    "keywords:letter_frequency": _letters,
    "language:response_language": _language,
    "detectable_content:number_placeholders": _placeholders,
    "detectable_content:postscript": _postscript,
    "detectable_format:number_bullet_lists": _bullets,
    "detectable_format:number_highlighted_sections": _highlights,
    "detectable_format:multiple_sections": _sections,
    "detectable_format:title": _title,
    "detectable_format:json_format": _json,
    "detectable_format:constrained_response": _constrained,
    "combination:two_responses": _two_responses,
    "combination:repeat_prompt": lambda rng: ({}, ""),  # filled in from the request itself
    "startend:end_checker": _end,
    "startend:quotation": _quotation,
    "change_case:capital_word_frequency": _capital_words,
    "change_case:english_capital": _capitals,
    "change_case:english_lowercase": _lowercase,
    "punctuation:no_comma": _no_comma,
}
ALONE = {"detectable_format:json_format", "detectable_format:constrained_response"}  # only as the one instruction
_GROUPS = [  # at most one instruction of each group in a prompt
    {"change_case:english_capital", "change_case:english_lowercase", "change_case:capital_word_frequency",
     "language:response_language"},
    {"length_constraints:number_paragraphs", "length_constraints:nth_paragraph_first_word",
     "combination:two_responses", "detectable_format:multiple_sections"},
    {"combination:repeat_prompt", "startend:quotation", "detectable_format:title"},
    {"language:response_language", "keywords:existence", "keywords:frequency", "keywords:letter_frequency",
     "startend:end_checker", "combination:repeat_prompt", "length_constraints:nth_paragraph_first_word"},
    {"startend:end_checker", "detectable_content:postscript"},
]


def compatible(a: str, b: str) -> bool:
    return a != b and not any(a in group and b in group for group in _GROUPS)


class InstructionTasks(Generator):
    """`difficulty` 1-3 instructions per prompt. `mode` and `partial` configure the verifier."""

    family = "instructions"
    levels = range(1, 4)
    system_hint = ""
    require_boxed = False

    def __init__(self, difficulty: int = 1, mode: str = "strict", partial: bool = False, seed: int = 0):
        super().__init__(difficulty=difficulty, seed=seed)
        if mode not in ("strict", "loose"):
            raise ValueError(f"mode must be 'strict' or 'loose', got {mode!r}")
        if not isinstance(partial, bool):
            raise TypeError(f"partial must be True or False, got {partial!r}")
        self.mode = mode
        self.partial = partial

    def params(self) -> str:
        return f"d{self.difficulty}"

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "instructions", {"mode": self.mode, "partial": self.partial}

    def make(self, rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        request = f"Write {rng.choice(FORMS)} about {rng.choice(TOPICS)}."
        pool = sorted(MAKERS) if self.difficulty == 1 else sorted(set(MAKERS) - ALONE)
        chosen: list[str] = []
        while len(chosen) < self.difficulty:
            candidate = rng.choice(pool)
            if all(compatible(candidate, c) for c in chosen):
                chosen.append(candidate)
        instructions, sentences = [], []
        for instruction_id in chosen:
            if instruction_id == "combination:repeat_prompt":
                kwargs, text = {"prompt_to_repeat": request}, (
                    "Before answering, repeat the request above word for word (only the first sentence, "
                    "without these instructions), then give your answer.")
            else:
                kwargs, text = MAKERS[instruction_id](rng)
            instructions.append({"id": instruction_id, "kwargs": kwargs})
            sentences.append(text)
        return " ".join([request, *sentences]), instructions, {}
