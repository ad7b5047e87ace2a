"""One front door: every request of every front end enters the engine
through its tokenizer actor, which renders, encodes and checks it. The ids
/tokenize answers are Hugging Face's (tests/fixtures/tokenizer_stories260k.json,
made by tools/fixtures/make_gguf_tokenizer_fixtures.py with transformers)."""
import asyncio
import json
import pathlib

import pytest
import requests

websockets = pytest.importorskip("websockets")

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def server(start_server):
    return start_server("--threads", 1)


def post(server, path, body):
    return requests.post(server.url(path), json=body, timeout=30)


def tokenizer_messages(server):
    m = server.metrics()
    return sum(v for k, v in m.items() if k.startswith('troupe_actor_messages_total{actor="tokenizer'))


def test_tokenize_matches_hugging_face(server):
    fixture = json.loads((FIXTURES / "tokenizer_stories260k.json").read_text())
    assert fixture["cases"]
    for case in fixture["cases"]:
        r = post(server, "/tokenize", {"prompt": case["text"]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["tokens"] == case["ids_with_special"], case["text"]
        assert body["count"] == len(case["ids_with_special"])
        assert body["max_model_len"] > 0
        r = post(server, "/tokenize", {"prompt": case["text"], "add_special_tokens": False})
        assert r.json()["tokens"] == case["ids"], case["text"]
        r = post(server, "/detokenize", {"tokens": case["ids"]})
        assert r.status_code == 200, r.text
        assert r.json()["prompt"] == case["decoded"]


def test_tokenize_chat_equals_what_generation_sees(server):
    messages = [{"role": "user", "content": "Once upon a time"}]
    tok = post(server, "/tokenize", {"messages": messages, "return_token_strs": True}).json()
    assert len(tok["token_strs"]) == tok["count"]
    r = post(server, "/v1/chat/completions", {"model": "stories260K", "messages": messages, "max_tokens": 2})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == tok["count"]


def test_tokenize_refusals_name_the_field(server):
    r = post(server, "/detokenize", {"tokens": [1, 600]})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "tokens[1]"
    r = post(server, "/tokenize", {"model": "nope", "prompt": "x"})
    assert r.status_code == 404 or r.json()["error"]["code"] == "model_not_found"


def test_http_and_websocket_requests_pass_through_the_tokenizer_actor(server):
    before = tokenizer_messages(server)
    r = post(server, "/v1/chat/completions",
             {"model": "stories260K", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    assert r.status_code == 200, r.text
    after_http = tokenizer_messages(server)
    assert after_http >= before + 1

    async def ws():
        async with websockets.connect(server.ws_url()) as c:
            json.loads(await c.recv())  # hello
            await c.send(json.dumps({"type": "generate", "id": "a", "prompt": [1, 403, 407], "max_tokens": 3}))
            while True:
                m = json.loads(await c.recv())
                if m["type"] in ("final", "error"):
                    return m

    m = asyncio.run(ws())
    assert m["type"] == "final", m
    assert m["usage"]["prompt_tokens"] == 3
    assert tokenizer_messages(server) >= after_http + 1


def test_return_tokens_as_token_ids(server):
    r = post(server, "/v1/completions", {"model": "stories260K", "prompt": "Once upon", "max_tokens": 3,
                                         "logprobs": 2, "return_tokens_as_token_ids": True})
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    assert lp["tokens"] and all(t.startswith("token_id:") for t in lp["tokens"])
    for top in lp["top_logprobs"]:
        assert all(k.startswith("token_id:") for k in top)


def test_echo_of_a_token_prompt_is_its_text(server):
    r = post(server, "/v1/completions", {"model": "stories260K", "prompt": [403, 407], "max_tokens": 1, "echo": True})
    assert r.status_code == 200, r.text
    detok = post(server, "/detokenize", {"tokens": [403, 407]}).json()["prompt"]
    assert r.json()["choices"][0]["text"].startswith(detok)


def test_a_refused_streamed_request_gets_its_status_not_a_200_stream(server):
    long_prompt = [403] * 5000
    r = requests.post(server.url("/v1/completions"),
                      json={"model": "stories260K", "prompt": [[1, 403], long_prompt], "n": 2, "stream": True,
                            "max_tokens": 4}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded"
    assert err["param"] == "prompt[1]"


@pytest.mark.parametrize("body, param, words", [
    ({"prompt": [1, 2 ** 31]}, "prompt[1]", "from 0 to 2147483647, got 2147483648"),
    ({"prompt": [1, 2 ** 63]}, "prompt[1]", "got 9223372036854775808"),
    ({"prompt": "x", "top_p": 1e-300}, "top_p", "top_p must be in (0, 1]"),
])
def test_error_texts_say_what_is_wrong(server, body, param, words):
    r = post(server, "/v1/completions", {"model": "stories260K", "max_tokens": 2, **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert words in err["message"], err["message"]
