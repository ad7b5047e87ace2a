"""Gemma 3's images through `troupe serve`, on the tiny fixture
tests/fixtures/hf/gemma3_vision (tools/fixtures/make_gemma3_vision_model.py):
OpenAI image_url parts give transformers' prompt length (each image framed
as Gemma 3's processor frames it) and greedy tokens (each image's tokens
seeing the whole image), streamed or not."""
import base64
import json
import os
import pathlib

import pytest

from conftest import Server

openai = pytest.importorskip("openai")

HERE = pathlib.Path(__file__).resolve().parent
FIXTURE = HERE.parent / "fixtures" / "hf" / "gemma3_vision"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
MODEL = "gemma3_vision"
PNG = [(FIXTURE / f"image{i}.png").read_bytes() for i in range(2)]


@pytest.fixture(scope="module")
def client(request, artifacts):
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    if not os.path.exists(troupe):
        pytest.skip(f"no troupe binary at {troupe}")
    s = Server(troupe, str(FIXTURE), ["-t", "1", "--exact-math"], artifacts / "serve-gemma3-vision.log")
    yield openai.OpenAI(base_url=s.url("/v1"), api_key="unused", max_retries=0, timeout=60)
    s.stop()


def openai_messages(case):
    out = []
    for m in case["messages"]:
        parts = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," +
                                                     base64.b64encode(PNG[p["image"]]).decode()}}
                 if p["type"] == "image" else p for p in m["content"]]
        out.append({"role": m["role"], "content": parts})
    return out


@pytest.mark.parametrize("index", [0, 1, 2])
def test_image_parts_give_transformers_greedy_tokens(client, index):
    case = REFERENCE["cases"][index]
    r = client.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=12, temperature=0,
                                       logprobs=True,
                                       extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
    assert [int(t.token.split(":")[1]) for t in r.choices[0].logprobs.content] == case["greedy"]
    assert r.usage.prompt_tokens == len(case["prompt_ids"])
    stream = client.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=12,
                                            temperature=0, stream=True, extra_body={"ignore_eos": True})
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == r.choices[0].message.content
