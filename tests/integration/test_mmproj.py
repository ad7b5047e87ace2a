"""llama.cpp's two files for a vision-language model through `troupe serve
--model model.gguf --mmproj mmproj.gguf`, as llama-server takes them: the
tiny LLaVA and Gemma 3 fixtures converted by llama.cpp's converters
(tests/fixtures/gguf_vision, tools/fixtures/make_gguf_vision_fixtures.py).
OpenAI image_url parts give transformers' prompt length and greedy tokens
for the weights those files hold; a text model given as the mmproj stops
the server at start, naming the file; served without its mmproj, a vision
model's GGUF says at start how to give it images."""
import base64
import json
import os
import pathlib
import subprocess

import pytest

from conftest import Server

openai = pytest.importorskip("openai")

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"


def troupe_binary(request):
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    if not os.path.exists(troupe):
        pytest.skip(f"no troupe binary at {troupe}")
    return troupe


@pytest.fixture(scope="module", params=["llava_clip", "gemma3_vision"])
def served(request, artifacts):
    name = request.param
    files = FIXTURES / "gguf_vision" / name
    s = Server(troupe_binary(request), str(files / "model.gguf"),
               ["--mmproj", str(files / "mmproj.gguf"), "-t", "1", "--exact-math"], artifacts / f"serve-mmproj-{name}.log")
    client = openai.OpenAI(base_url=s.url("/v1"), api_key="unused", max_retries=0, timeout=60)
    yield name, client, json.loads((files / "reference.json").read_text())
    s.stop()


def openai_messages(name, case):
    png = [(FIXTURES / "hf" / name / f"image{i}.png").read_bytes() for i in range(2)]
    out = []
    for m in case["messages"]:
        parts = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," +
                                                     base64.b64encode(png[p["image"]]).decode()}}
                 if p["type"] == "image" else p for p in m["content"]]
        out.append({"role": m["role"], "content": parts})
    return out


@pytest.mark.parametrize("index", [0, 1, 2])
def test_image_parts_give_transformers_greedy_tokens(served, index):
    name, client, reference = served
    case = reference["cases"][index]
    model = client.models.list().data[0].id
    r = client.chat.completions.create(model=model, messages=openai_messages(name, case), max_tokens=12,
                                       temperature=0, logprobs=True,
                                       extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
    assert [int(t.token.split(":")[1]) for t in r.choices[0].logprobs.content] == case["greedy"]
    assert r.usage.prompt_tokens == len(case["prompt_ids"])


def test_a_text_model_as_the_mmproj_stops_the_server_naming_it(request):
    model = FIXTURES / "gguf_vision" / "llava_clip" / "model.gguf"
    p = subprocess.run([troupe_binary(request), "serve", "--model", str(model), "--mmproj", str(model),
                        "--host", "127.0.0.1", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "not an mmproj file" in p.stderr and str(model) in p.stderr, p.stderr


def test_without_its_mmproj_a_vision_models_gguf_says_how_to_give_it_images(request, artifacts):
    model = FIXTURES / "gguf_vision" / "gemma3_vision" / "model.gguf"
    log = artifacts / "serve-mmproj-missing.log"
    s = Server(troupe_binary(request), str(model), ["-t", "1"], log)
    try:
        client = openai.OpenAI(base_url=s.url("/v1"), api_key="unused", max_retries=0, timeout=60)
        case = json.loads((FIXTURES / "gguf_vision" / "gemma3_vision" / "reference.json").read_text())["cases"][0]
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=client.models.list().data[0].id,
                                           messages=openai_messages("gemma3_vision", case), max_tokens=2)
        assert "reads text only" in e.value.message
    finally:
        s.stop()
    assert "(--mmproj FILE) gives it images" in log.read_text()
