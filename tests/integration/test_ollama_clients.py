"""The official `ollama` package's client against `troupe serve`.

On llama.cpp's GGUF of a NomicBERT (tests/fixtures/gguf/nomic_bert_embedding_mean.gguf,
the file kind Ollama's nomic-embed-text is; its vectors from
sentence-transformers, tools/fixtures/make_nomic_bert_models.py): /api/embed
and the older /api/embeddings, the model list, and the errors a client meets,
as the client raises them.

On stories260K: chat and generate, streamed and not, against the greedy text
published with the model (its README) and against the OpenAI route's answer
to the same conversation; /api/show and /api/ps as the client reads them."""
import json
import math
import os
import pathlib
import urllib.request

import pytest

from conftest import Server

ollama = pytest.importorskip("ollama")

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
GGUF = FIXTURES / "gguf" / "nomic_bert_embedding_mean.gguf"
REFERENCE = json.loads((FIXTURES / "hf" / "nomic_bert_embedding_mean" / "reference.json").read_text())
MODEL = "nomic_bert_embedding_mean"
TOLERANCE = 2e-5  # as tests/model/embedding_model_test.cpp


@pytest.fixture(scope="module")
def server(request, artifacts):
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    if not os.path.exists(troupe):
        pytest.skip(f"no troupe binary at {troupe}")
    # 128 positions of the model's 2048: the too-long case stays small.
    s = Server(troupe, str(GGUF), ["-t", "1", "--ctx", "128"], artifacts / "serve-ollama.log")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return ollama.Client(host=server.url(""), timeout=60)


def assert_close(got, want):
    assert len(got) == len(want)
    worst = max(abs(a - b) for a, b in zip(got, want))
    assert worst < TOLERANCE, worst


def test_embed_matches_sentence_transformers(client):
    r = client.embed(model=MODEL, input=REFERENCE["texts"])
    assert len(r.embeddings) == len(REFERENCE["texts"])
    for got, want in zip(r.embeddings, REFERENCE["embeddings"]):
        assert_close(got, want)
        assert math.isclose(sum(x * x for x in got), 1.0, rel_tol=1e-5)
    assert r.prompt_eval_count == sum(len(t) for t in REFERENCE["token_ids"])
    assert r.total_duration > 0


def test_legacy_embeddings_and_latest_tag(client):
    r = client.embeddings(model=MODEL + ":latest", prompt=REFERENCE["texts"][0])
    assert_close(r.embedding, REFERENCE["embeddings"][0])


def test_truncation(client):
    long_text = " ".join(REFERENCE["texts"][3] for _ in range(4))
    assert client.embed(model=MODEL, input=long_text).prompt_eval_count == 128
    with pytest.raises(ollama.ResponseError) as e:
        client.embed(model=MODEL, input=long_text, truncate=False)
    assert e.value.status_code == 400
    assert "context holds 128" in e.value.error


def test_list_and_errors(client):
    assert [m.model for m in client.list().models] == [MODEL]
    with pytest.raises(ollama.ResponseError) as e:
        client.embed(model="llama3", input="a")
    assert e.value.status_code == 404 and "'llama3' not found" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=False)
    assert e.value.status_code == 400 and "does not support chat" in e.value.error
    # The server still answers.
    assert len(client.embed(model=MODEL, input="a").embeddings) == 1


CHAT_MODEL = "stories260K"
TEMPLATE = HERE / "chat_template.jinja"


@pytest.fixture(scope="module")
def chat_server(start_server):
    return start_server("--chat-template", TEMPLATE)


@pytest.fixture(scope="module")
def chat_client(chat_server):
    return ollama.Client(host=chat_server.url(""), timeout=60)


GREEDY = {"temperature": 0, "num_predict": 40}


def test_generate_raw_continues_the_published_text(chat_client, reference_text):
    # The published text is greedy from BOS: greedy from its first sentence
    # (a raw prompt, BOS added) goes on as it does.
    head = "Once upon a time, there was a little girl named Lily."
    assert reference_text.startswith(head)
    r = chat_client.generate(model=CHAT_MODEL, prompt=head, raw=True, options=GREEDY)
    assert r.done and r.done_reason == "length" and r.eval_count == 40
    assert len(r.response) > 100
    assert reference_text[len(head):].startswith(r.response)
    streamed = list(chat_client.generate(model=CHAT_MODEL, prompt=head, raw=True, options=GREEDY, stream=True))
    assert len(streamed) > 10
    assert "".join(c.response for c in streamed) == r.response
    assert [c.done for c in streamed].count(True) == 1 and streamed[-1].done
    assert streamed[-1].prompt_eval_count == r.prompt_eval_count > 0


def test_penalty_window_reaches_the_sampler(chat_client, reference_text):
    # repeat_last_n is the window of the penalties: 0 turns a strong
    # repeat_penalty off (greedy, the published text), -1 lets it see the
    # whole sequence, 8 only the last 8 tokens, which changes other choices.
    head = "Once upon a time, there was a little girl named Lily."

    def run(last_n):
        opts = dict(GREEDY, repeat_penalty=1.5, repeat_last_n=last_n)
        return chat_client.generate(model=CHAT_MODEL, prompt=head, raw=True, options=opts).response

    off, everything, last8 = run(0), run(-1), run(8)
    assert reference_text[len(head):].startswith(off)
    assert everything != off
    assert last8 not in (off, everything)


def openai_chat(server, messages, max_tokens):
    body = json.dumps({"model": CHAT_MODEL, "messages": messages, "temperature": 0, "max_tokens": max_tokens})
    req = urllib.request.Request(server.url("/v1/chat/completions"), body.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def test_chat_answers_as_the_openai_route(chat_client, chat_server):
    messages = [{"role": "system", "content": "Tell a story."}, {"role": "user", "content": "Once upon a time"}]
    want = openai_chat(chat_server, messages, 40)
    r = chat_client.chat(model=CHAT_MODEL + ":latest", messages=messages, options=GREEDY)
    assert r.message.role == "assistant"
    assert r.message.content == want["choices"][0]["message"]["content"]
    assert r.eval_count == want["usage"]["completion_tokens"]
    assert r.prompt_eval_count == want["usage"]["prompt_tokens"]
    chunks = list(chat_client.chat(model=CHAT_MODEL, messages=messages, options=GREEDY, stream=True))
    assert "".join(c.message.content for c in chunks) == r.message.content
    assert chunks[-1].done and chunks[-1].done_reason == "length"
    # /api/generate without raw: the prompt as the user's message, the
    # system beside it, under the same template.
    g = chat_client.generate(model=CHAT_MODEL, system="Tell a story.", prompt="Once upon a time", options=GREEDY)
    assert g.response == r.message.content


def test_show_ps_and_refusals(chat_client):
    show = chat_client.show(CHAT_MODEL)
    assert show.capabilities == ["completion", "tools"]
    assert show.details.family == "llama" and show.details.format == "gguf"
    assert show.modelinfo["llama.context_length"] > 0
    ps = chat_client.ps()
    assert [m.model for m in ps.models] == [CHAT_MODEL]
    assert ps.models[0].size > 0 and ps.models[0].size_vram == 0  # on the CPU
    with pytest.raises(ollama.ResponseError) as e:
        chat_client.chat(model=CHAT_MODEL, messages=[{"role": "user", "content": "hi"}], think=True)
    assert e.value.status_code == 400 and "does not support thinking" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        chat_client.generate(model=CHAT_MODEL, prompt="x", options={"mirostat": 2})
    assert e.value.status_code == 400 and "options.mirostat" in e.value.error
    # An empty prompt loads the model, as Ollama's does.
    assert chat_client.generate(model=CHAT_MODEL).done_reason == "load"
