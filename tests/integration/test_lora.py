"""LoRA adapters end to end: `troupe serve --lora` on stories260K with the
adapter of tests/fixtures/lora/stories260k.gguf (made by PEFT, converted by
llama.cpp's convert_lora_to_gguf.py; tools/fixtures/make_lora_fixtures.py)
answers with the greedy text PEFT gives, streamed or not; `--lora-scaled` at 0
gives the base model's; GET /lora-adapters lists them as llama-server does;
an adapter for another model stops the server at start with one line naming
the problem."""
import json
import pathlib
import subprocess

import pytest
import requests

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "lora"
REFERENCE = json.loads((FIXTURES / "stories260k.json").read_text())
ADAPTER = FIXTURES / REFERENCE["adapter"]


@pytest.fixture(scope="module")
def adapted(start_server):
    return start_server("--threads", 1, "--lora", ADAPTER)


@pytest.fixture(scope="module")
def scaled_to_zero(start_server):
    return start_server("--threads", 1, "--lora-scaled", ADAPTER, 0)


def complete(server, prompt_ids, n, stream=False):
    body = {"model": "stories260K", "prompt": prompt_ids, "max_tokens": n, "temperature": 0, "ignore_eos": True,
            "stream": stream}
    r = requests.post(server.url("/v1/completions"), json=body, timeout=60, stream=stream)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["choices"][0]["text"]
    text = ""
    for line in r.iter_lines(decode_unicode=True):
        if line.startswith("data: ") and line != "data: [DONE]":
            chunk = json.loads(line[len("data: "):])
            text += "".join(c["text"] for c in chunk["choices"])
    return text


def test_the_adapter_gives_peft_greedy_text(adapted):
    for case in REFERENCE["cases"]:
        n = len(case["greedy_ids"])
        assert complete(adapted, case["prompt_ids"], n) == case["greedy_text"]
        assert complete(adapted, case["prompt_ids"], n, stream=True) == case["greedy_text"]


def test_the_adapters_are_listed_as_llama_server_lists_them(adapted, scaled_to_zero):
    for server, scale in ((adapted, 1.0), (scaled_to_zero, 0.0)):
        r = requests.get(server.url("/lora-adapters"), timeout=10)
        assert r.status_code == 200, r.text
        assert r.json() == [{"id": 0, "path": str(ADAPTER), "scale": scale}]
    r = requests.post(adapted.url("/lora-adapters"), json=[{"id": 0, "scale": 0.5}], timeout=10)
    assert r.status_code == 405
    assert "set when the server starts" in r.json()["error"]["message"]


def test_scale_zero_gives_the_base_model(scaled_to_zero):
    for case in REFERENCE["cases"]:
        assert complete(scaled_to_zero, case["prompt_ids"], len(case["greedy_ids"])) == case["base_greedy_text"]
        assert case["base_greedy_text"] != case["greedy_text"]


def test_an_adapter_for_another_model_stops_the_start(request):
    troupe = request.config.getoption("--troupe")
    model = request.config.getoption("--model")
    # The tiny Llama fixture's adapter: a "llama" GGUF adapter too, 64 wide
    # where stories260K's FFN is 172.
    other = FIXTURES / "llama.gguf"
    r = subprocess.run([troupe, "serve", "--model", model, "--port", "0", "--lora", str(other)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "another model" in r.stderr, r.stderr
    assert str(other) in r.stderr
