"""The IFEval-style instruction checks: each of the 25 types follows and fails, strict and loose modes."""

from __future__ import annotations

import json

import pytest

from rlvr.registry import make_verifier
from rlvr.verifiers.instructions import INSTRUCTION_IDS, InstructionVerifier, check_instruction
from rlvr.verifiers.instructions.text import count_sentences, count_upper_words, count_words

LAKE = "The lake was calm at dawn. A heron waited in the reeds. Nobody spoke."

# id -> (kwargs, a response that follows, a response that does not)
CASES = {
    "keywords:existence": ({"keywords": ["heron", "reeds"]}, LAKE, "The lake was calm."),
    "keywords:frequency": ({"keyword": "lake", "frequency": 2, "relation": "at least"},
                           "The lake, the LAKE.", LAKE),
    "keywords:forbidden_words": ({"forbidden_words": ["heron"]}, "The herons flew.", LAKE),
    "keywords:letter_frequency": ({"letter": "z", "let_frequency": 2, "let_relation": "less than"},
                                  "A lazy day.", "Zero zebras."),
    "language:response_language": ({"language": "fr"}, "Le lac était calme à l'aube et personne ne parlait.", LAKE),
    "length_constraints:number_sentences": ({"num_sentences": 3, "relation": "less than"},
                                            "Dr. Lee left at 5 p.m. on Friday. It rained.", LAKE),
    "length_constraints:number_paragraphs": ({"num_paragraphs": 2}, "First part.\n***\nSecond part.",
                                             "First part.\n***\n***\nSecond part."),
    "length_constraints:number_words": ({"num_words": 5, "relation": "at least"}, LAKE, "Too short here."),
    "length_constraints:nth_paragraph_first_word": (
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "heron"},
        "The lake.\n\n\"Heron, grey and still.", "The lake.\n\nA heron."),
    "detectable_content:number_placeholders": ({"num_placeholders": 2}, "Dear [name], at [address].",
                                               "Dear [name], hello."),
    "detectable_content:postscript": ({"postscript_marker": "P.S."}, f"{LAKE}\n\nP.S. bring tea.", LAKE),
    "detectable_format:number_bullet_lists": ({"num_bullets": 2}, "Items:\n* tea\n- bread",
                                              "Items:\n* tea\n* bread\n* jam"),
    "detectable_format:constrained_response": ({}, "My answer is maybe.", "Maybe, I think."),
    "detectable_format:number_highlighted_sections": ({"num_highlights": 2}, "*calm* lake and **grey heron**",
                                                      "*calm* lake and ** **"),
    "detectable_format:multiple_sections": ({"section_spliter": "Section", "num_sections": 2},
                                            "Section 1\nLake.\nSection 2\nHeron.", "Section 1\nLake and heron."),
    "detectable_format:json_format": ({}, '```json\n{"lake": "calm"}\n```', '{"lake": calm}'),
    "detectable_format:title": ({}, "<<Dawn at the Lake>>\n" + LAKE, "<Dawn>\n" + LAKE),
    "combination:two_responses": ({}, "Calm lake.\n******\nStill heron.", "Calm lake.\n******\nCalm lake."),
    "combination:repeat_prompt": ({"prompt_to_repeat": "Describe the lake."}, "describe the lake. It was calm.",
                                  "The lake was calm."),
    "startend:end_checker": ({"end_phrase": "Any questions?"}, f'"{LAKE} Any questions?"',
                             f"{LAKE} Any questions? Bye."),
    "startend:quotation": ({}, f' "{LAKE}" ', f"'{LAKE}'"),
    "change_case:capital_word_frequency": ({"capital_frequency": 3, "capital_relation": "at least"},
                                           "I DON'T like the lake.", "I do not like the LAKE."),
    "change_case:english_capital": ({}, LAKE.upper(), LAKE),
    "change_case:english_lowercase": ({}, LAKE.lower(), "LE LAC ÉTAIT CALME ET PERSONNE NE PARLAIT.".lower()),
    "punctuation:no_comma": ({}, LAKE, "Calm, still, grey."),
}


def test_every_ifeval_type_has_a_case():
    assert len(INSTRUCTION_IDS) == 25 and set(CASES) == set(INSTRUCTION_IDS)


@pytest.mark.parametrize("instruction_id", sorted(CASES))
def test_each_type_follows_and_fails(instruction_id):
    kwargs, good, bad = CASES[instruction_id]
    assert check_instruction(good, instruction_id, kwargs) is None
    reason = check_instruction(bad, instruction_id, kwargs)
    assert isinstance(reason, str) and reason
    verifier = InstructionVerifier()
    score = verifier.score(bad, [{"id": instruction_id, "kwargs": kwargs}])
    assert score.value == 0.0 and score.reason == "not_followed"
    assert score.info["instructions"] == [{"id": instruction_id, "followed": False, "why": reason}]


def test_relations_are_strict_below_and_inclusive_at_least():
    at_least = {"num_words": 3, "relation": "at least"}
    less = {"num_words": 3, "relation": "less than"}
    assert check_instruction("one two three", "length_constraints:number_words", at_least) is None
    assert check_instruction("one two three", "length_constraints:number_words", less) == "3 word(s), needs fewer than 3"


def test_loose_mode_forgives_a_chatty_first_line_and_markdown():
    spec = [{"id": "startend:quotation"}, {"id": "detectable_format:title"}]
    text = 'Sure! Here it is:\n"<<The **Lake**>> calm and still"'
    strict = InstructionVerifier("strict").score(text, spec)
    loose = InstructionVerifier("loose").score(text, spec)
    assert strict.value == 0.0 and strict.info["instructions"][0]["followed"] is False
    assert strict.info["instructions"][1]["followed"] is True
    assert loose.value == 1.0 and loose.reason is None


def test_partial_credit_and_breakdown():
    spec = [("punctuation:no_comma", {}), ("change_case:english_lowercase", {}),
            ("keywords:existence", {"keywords": ["heron"]})]
    score = InstructionVerifier(partial=True).score("the grey heron waited by the quiet lake, as it does every morning",
                                                  instructions=spec)
    assert score.value == pytest.approx(2 / 3) and score.reason == "not_followed"
    assert [i["followed"] for i in score.info["instructions"]] == [False, True, True]
    assert score.info["instructions"][0]["why"] == "1 comma(s)"


def test_ifeval_row_layout_and_chat_messages():
    row = {"instruction_id_list": ["punctuation:no_comma", "startend:end_checker"],
           "kwargs": [{}, {"end_phrase": "Done.", "unused": None}]}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "All good. Done."}]
    assert make_verifier("instructions").score(messages, row).value == 1.0


@pytest.mark.parametrize("spec, match", [
    (None, "non-empty list"),
    ([{"id": "keywords:teleport"}], "unknown instruction"),
    ([{"id": "keywords:frequency", "kwargs": {"keyword": "x", "frequency": 2}}], "missing"),
    ([{"id": "keywords:frequency", "kwargs": {"keyword": "x", "frequency": 2, "relation": "about"}}], "bad relation"),
    ([{"id": "length_constraints:number_words", "kwargs": {"num_words": "ten", "relation": "at least"}}], "bad num_words"),
])
def test_a_bad_task_is_bad_reference_never_a_raise(spec, match):
    score = InstructionVerifier().score("anything", spec)
    assert score.value == 0.0 and score.reason == "bad_reference" and match in score.info["why"]


def test_model_output_never_raises():
    spec = [{"id": i, "kwargs": CASES[i][0]} for i in INSTRUCTION_IDS]
    for completion in ["", "   ", None, 42, [{"role": "assistant", "content": None}], "\x00" * 50, "*" * 10000]:
        score = InstructionVerifier("loose").score(completion, spec)
        assert score.value == 0.0 and score.reason in ("no_answer", "not_followed")


def test_counters():
    assert count_words("It's 3.5 km -- far_away!") == 6  # It, s, 3, 5, km, far_away
    assert count_sentences("") == 0 and count_sentences("no stop at all") == 1
    assert count_sentences("Mr. Smith met Dr. Jones. They talked! Did it help? Yes.") == 4
    assert count_sentences("It was in 1999. The year ended.") == 2
    assert count_sentences("Wait... then it came. And went.") == 2
    assert count_upper_words("NASA and the U.S. DON'T agree, OK?") == 5


def test_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode must be"):
        InstructionVerifier(mode="lenient")


def test_score_is_json_ready():
    score = InstructionVerifier().score(LAKE, [{"id": "punctuation:no_comma"}])
    assert json.loads(json.dumps(score.to_dict()))["info"]["instructions"][0]["followed"] is True
