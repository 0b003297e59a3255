"""Fuzzed request bodies: the server answers 200 or a 4xx JSON error, never a 5xx, and keeps serving."""

import json

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvr.integrations.server import ServerConfig, create_app

CLIENT = TestClient(create_app(ServerConfig(token="t", max_batch=16, max_chars=500, max_body_bytes=20000)))
AUTH = {"Authorization": "Bearer t", "content-type": "application/json"}

scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=10), inner, max_size=4), max_leaves=20)
names = st.sampled_from(["think_format", "boxed", "tag_count", "repetition", "overlong", "nope", "", "math"])
completions = st.text(max_size=200) | st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "x"]), "content": st.text(max_size=50) | json_values}), max_size=3)
# Mostly well-formed items (so the verifiers and envs really run), with every field sometimes wrong.
fields = st.dictionaries(st.sampled_from(["level", "question", "tests", "x"]), json_values, max_size=3) | json_values
options = st.just({}) | st.dictionaries(st.sampled_from(
    ["answer_tags", "prefilled_think", "ngram_size", "max_penalty", "max_length", "buffer", "bogus"]),
    scalars, max_size=2) | json_values
seeds = st.integers(0, 50) | json_values
verifier_items = st.fixed_dictionaries({"completion": completions, "verifier": names},
                                       optional={"reference": json_values, "fields": fields, "options": options})
env_items = st.fixed_dictionaries({"completion": completions, "seed": seeds,
                                   "env": st.sampled_from(["rlvr/Arithmetic-v0", "rlvr/Nope-v0"])},
                                  optional={"options": st.just({"digits": 1}) | options})
free_items = st.fixed_dictionaries({"completion": completions | json_values},
                                   optional={"verifier": names, "reference": json_values, "fields": fields,
                                             "options": options, "seed": seeds, "extra": json_values})
items = verifier_items | env_items | free_items
bodies = st.fixed_dictionaries({"items": st.lists(items, max_size=20)},
                               optional={"verifier": names, "options": options}) | json_values


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_any_json_body_gets_200_or_a_4xx_json_error(body):
    response = CLIENT.post("/score", content=json.dumps(body).encode(), headers=AUTH)
    assert response.status_code == 200 or 400 <= response.status_code < 500, (response.status_code, response.text)
    answer = response.json()
    if response.status_code == 200:
        assert len(answer["results"]) == len(body["items"])
        assert all(isinstance(r["score"], float) for r in answer["results"])
    else:
        assert isinstance(answer["error"], str) and answer["error"]


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=300))
def test_any_bytes_get_a_json_answer_never_a_5xx(raw):
    # bytes that happen to be a well-formed request (b'{"items": []}') are scored: 200 with results
    response = CLIENT.post("/score", content=raw, headers=AUTH)
    assert 400 <= response.status_code < 500 or response.status_code == 200, (response.status_code, response.text)
    assert "results" in response.json() if response.status_code == 200 else response.json()["error"]


good_items = st.fixed_dictionaries(
    {"completion": completions, "verifier": st.sampled_from(["think_format", "boxed", "tag_count", "repetition",
                                                             "overlong", "math"])},
    optional={"reference": json_values, "fields": st.dictionaries(st.sampled_from(["level", "question", "x"]),
                                                                  json_values, max_size=3)},
) | st.fixed_dictionaries({"completion": completions, "env": st.just("rlvr/Arithmetic-v0"),
                           "seed": st.integers(0, 10**6), "options": st.just({"digits": 2, "ops": "+-*"})})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(good_items, min_size=1, max_size=16))
def test_well_formed_batches_of_any_content_are_scored(batch):
    response = CLIENT.post("/score", json={"items": batch}, headers=AUTH)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(batch)
    for item, result in zip(batch, results):
        assert result["score"] <= 1.0
        if result["score"] < (0.0 if item.get("verifier") in ("repetition", "overlong") else 1.0):
            assert result["reason"], result  # a score below the best says why
