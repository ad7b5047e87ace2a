"""Images through `troupe serve` from the official clients, on the tiny LLaVA
fixture tests/fixtures/hf/llava_clip (tools/fixtures/make_llava_models.py):
OpenAI's image_url parts give transformers' prompt length and greedy tokens
for the fixture's PNG files; Anthropic's image blocks, Ollama's images and
the Responses API's input_image give the same answer; bad images are 400s
naming their field."""
import asyncio
import base64
import json
import os
import pathlib

import pytest

from conftest import Server

openai = pytest.importorskip("openai")

HERE = pathlib.Path(__file__).resolve().parent
FIXTURE = HERE.parent / "fixtures" / "hf" / "llava_clip"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
MODEL = "llava_clip"
PNG = [(FIXTURE / f"image{i}.png").read_bytes() for i in range(2)]


def data_url(png):
    return "data:image/png;base64," + base64.b64encode(png).decode()


@pytest.fixture(scope="module")
def server(request, artifacts):
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    if not os.path.exists(troupe):
        pytest.skip(f"no troupe binary at {troupe}")
    # Exact math: greedy tokens compared with transformers' (the first
    # step's top two logits are 0.004 apart).
    s = Server(troupe, str(FIXTURE), ["-t", "1", "--exact-math"], artifacts / "serve-vision.log")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0, timeout=60)


def openai_messages(case):
    """A fixture conversation in OpenAI's content parts."""
    out = []
    for m in case["messages"]:
        parts = []
        for p in m["content"]:
            if p["type"] == "image":
                parts.append({"type": "image_url", "image_url": {"url": data_url(PNG[p["image"]])}})
            else:
                parts.append(p)
        out.append({"role": m["role"], "content": parts})
    return out


def greedy(client, messages, n=12):
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=n, temperature=0,
                                       logprobs=True,
                                       extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
    ids = [int(t.token.split(":")[1]) for t in r.choices[0].logprobs.content]
    return r, ids


@pytest.mark.parametrize("index", [0, 1, 2])
def test_image_parts_give_transformers_greedy_tokens(client, index):
    case = REFERENCE["cases"][index]
    r, ids = greedy(client, openai_messages(case))
    assert ids == case["greedy"]
    assert r.usage.prompt_tokens == len(case["prompt_ids"])


def test_streaming_with_images_gives_the_same_text(client):
    case = REFERENCE["cases"][1]  # two images
    whole, _ = greedy(client, openai_messages(case))
    stream = client.chat.completions.create(model=MODEL, messages=openai_messages(case), max_tokens=12,
                                            temperature=0, stream=True, extra_body={"ignore_eos": True})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == whole.choices[0].message.content


def test_the_responses_api_reads_input_images(client):
    case = REFERENCE["cases"][0]  # the image, then a question
    whole, _ = greedy(client, openai_messages(case))
    question = case["messages"][0]["content"][1]["text"]
    r = client.responses.create(model=MODEL, max_output_tokens=12, temperature=0,
                                input=[{"role": "user", "content": [
                                    {"type": "input_image", "image_url": data_url(PNG[0])},
                                    {"type": "input_text", "text": question}]}],
                                extra_body={"ignore_eos": True})
    assert r.output_text == whole.choices[0].message.content


def test_anthropic_image_blocks(client, server):
    anthropic = pytest.importorskip("anthropic")
    case = REFERENCE["cases"][0]
    whole, _ = greedy(client, openai_messages(case))
    question = case["messages"][0]["content"][1]["text"]
    a = anthropic.Anthropic(base_url=server.url(""), api_key="unused", max_retries=0)
    m = a.messages.create(model=MODEL, max_tokens=12, extra_body={"temperature": 0, "ignore_eos": True},
                          messages=[{"role": "user", "content": [
                              {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                           "data": base64.b64encode(PNG[0]).decode()}},
                              {"type": "text", "text": question}]}])
    assert m.content[0].text == whole.choices[0].message.content
    assert m.usage.input_tokens == len(case["prompt_ids"])


def test_ollama_images(client, server):
    ollama = pytest.importorskip("ollama")
    case = REFERENCE["cases"][0]  # Ollama's images go before the text, as here
    whole, _ = greedy(client, openai_messages(case))
    question = case["messages"][0]["content"][1]["text"]
    o = ollama.Client(host=server.url(""))
    r = o.chat(model=MODEL, messages=[{"role": "user", "content": question, "images": [PNG[0]]}],
               options={"temperature": 0, "num_predict": 12})
    assert whole.choices[0].message.content.startswith(r.message.content)
    assert r.prompt_eval_count == len(case["prompt_ids"])


@pytest.mark.parametrize("url, field, words", [
    ("https://example.com/cat.png", "messages[0].content[0].image_url.url", "does not fetch"),
    ("data:image/png;base64,@@@@", "messages[0].content[0].image_url.url", "not base64"),
    ("data:text/plain;base64,aGVsbG8=", "messages[0].content[0].image_url.url", "base64 image"),
    (data_url(PNG[0][:len(PNG[0]) // 2]), "messages[0].content[0].image_url", "cannot read the image"),
    (data_url(b"GIF89a" + bytes(64)), "messages[0].content[0].image_url", "cannot read the image"),
])
def test_bad_images_are_400s_naming_the_field(client, url, field, words):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "what is it?"}]}])
    err = e.value.body
    assert err["param"] == field, err
    assert words in err["message"], err
    # The server goes on serving.
    _, ids = greedy(client, openai_messages(REFERENCE["cases"][2]), n=4)
    assert ids == REFERENCE["cases"][2]["greedy"][:4]


def test_websocket_images_take_the_vision_models_message_limit(client, server):
    """A WebSocket generate message with an image (the server raised its
    message limit for a model that reads images) streams the HTTP route's
    greedy text."""
    websockets = pytest.importorskip("websockets")
    case = REFERENCE["cases"][1]  # two images
    whole, _ = greedy(client, openai_messages(case))

    async def go():
        async with websockets.connect(server.ws_url(), max_size=None) as ws:
            hello = json.loads(await ws.recv())
            assert hello["max_message_bytes"] >= 32 << 20
            await ws.send(json.dumps({"type": "generate", "id": "img", "messages": openai_messages(case),
                                      "max_tokens": 12, "temperature": 0, "ignore_eos": True}))
            text = ""
            while True:
                f = json.loads(await asyncio.wait_for(ws.recv(), 60))
                if f["type"] == "token":
                    text += f["text"]
                elif f["type"] in ("final", "error"):
                    assert f["type"] == "final", f
                    return text + f["text"], f

    text, final = asyncio.run(go())
    assert text == whole.choices[0].message.content
    assert final["usage"]["prompt_tokens"] == len(case["prompt_ids"])
