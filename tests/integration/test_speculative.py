"""Speculative decoding (`--speculative ngram`) and prompt logprobs (`echo`
with `logprobs`) over HTTP on stories260K: the greedy output of a server
that speculates equals that of one that does not, /metrics counts the
proposals, and an echoed prompt comes back scored token by token."""
import json

import pytest
import requests


@pytest.fixture(scope="module")
def plain(start_server):
    return start_server("--threads", 1)


@pytest.fixture(scope="module")
def spec(start_server):
    return start_server("--threads", 1, "--speculative", "ngram", "--draft-tokens", 4)


STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. "
         "One day, she saw a big red ball in the park. ")


def complete(server, body):
    r = requests.post(server.url("/v1/completions"), json={"model": "stories260K", **body}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def spec_counter(server, name):
    return sum(v for k, v in server.metrics().items() if k.startswith(name + "{"))


def test_speculation_keeps_the_greedy_output_and_counts_proposals(plain, spec):
    body = {"prompt": STORY * 2 + "Once upon a time,", "max_tokens": 120, "temperature": 0, "ignore_eos": True}
    want = complete(plain, body)["choices"][0]["text"]
    before = spec_counter(spec, "troupe_spec_proposed_tokens_total")
    got = complete(spec, body)["choices"][0]["text"]
    assert got == want
    proposed = spec_counter(spec, "troupe_spec_proposed_tokens_total") - before
    assert proposed > 0
    assert spec_counter(spec, "troupe_spec_accepted_tokens_total") > 0
    # Per request off: no proposal for it.
    before = spec_counter(spec, "troupe_spec_proposed_tokens_total")
    off = complete(spec, {**body, "speculative": False})["choices"][0]["text"]
    assert off == want
    assert spec_counter(spec, "troupe_spec_proposed_tokens_total") == before


def test_speculative_flag_must_be_a_bool(spec):
    r = requests.post(spec.url("/v1/completions"),
                      json={"model": "stories260K", "prompt": "x", "max_tokens": 2, "speculative": "yes"}, timeout=30)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "speculative"


def test_echo_with_logprobs_scores_every_prompt_token(plain):
    prompt = "Once upon a time, there was a little dog"
    out = complete(plain, {"prompt": prompt, "max_tokens": 1, "echo": True, "logprobs": 1, "temperature": 0})
    choice = out["choices"][0]
    lp = choice["logprobs"]
    n_prompt = out["usage"]["prompt_tokens"]
    assert len(lp["tokens"]) == n_prompt + 1
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(isinstance(v, float) and v <= 0 for v in lp["token_logprobs"][1:])
    assert all(len(t) == 1 for t in lp["top_logprobs"][1:])
    assert lp["text_offset"] == sorted(lp["text_offset"])
    assert choice["text"].startswith(prompt)
    # The same distribution computed another way: the prompt cut after k
    # tokens and its first generated token's best alternative.
    ids = requests.post(plain.url("/tokenize"), json={"prompt": prompt}, timeout=30).json()["tokens"]
    for k in (3, len(ids) - 2):
        short = complete(plain, {"prompt": ids[:k], "max_tokens": 1, "logprobs": 1, "temperature": 0})
        best = list(short["choices"][0]["logprobs"]["top_logprobs"][0].values())[0]
        scored = list(lp["top_logprobs"][k].values())[0]
        assert abs(best - scored) < 1e-3, (k, best, scored)


def test_streamed_echo_sends_the_prompt_scores_first(plain):
    r = requests.post(plain.url("/v1/completions"),
                      json={"model": "stories260K", "prompt": "The little dog", "max_tokens": 3, "echo": True,
                            "logprobs": 0, "stream": True, "temperature": 0}, stream=True, timeout=60)
    assert r.status_code == 200
    chunks = [json.loads(line[6:]) for line in r.iter_lines(decode_unicode=True)
              if line.startswith("data: ") and line != "data: [DONE]"]
    first = chunks[0]["choices"][0]["logprobs"]
    assert first["token_logprobs"][0] is None
    assert len(first["tokens"]) >= 2
    later = [c["choices"][0]["logprobs"] for c in chunks[1:] if c["choices"] and c["choices"][0].get("logprobs")]
    assert all(len(x["tokens"]) == 1 for x in later)
