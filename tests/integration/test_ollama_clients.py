"""The official `ollama` package's client against `troupe serve` on llama.cpp's
GGUF of a NomicBERT (tests/fixtures/gguf/nomic_bert_embedding_mean.gguf, the
file kind Ollama's nomic-embed-text is; its vectors from sentence-transformers,
tools/fixtures/make_nomic_bert_models.py): /api/embed and the older
/api/embeddings, the model list, and the errors a client meets, as the client
raises them."""
import json
import math
import os
import pathlib

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
    assert e.value.status_code == 404 and "/v1/chat/completions" in e.value.error
    # The server still answers.
    assert len(client.embed(model=MODEL, input="a").embeddings) == 1
