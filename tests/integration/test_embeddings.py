"""The official `openai` package's embeddings client against `troupe serve`
on the sentence-transformers fixture tests/fixtures/hf/qwen3_embedding: the
vectors sentence-transformers computed for its texts (reference.json, from
tools/fixtures/make_embedding_models.py), in both encodings the client asks
for, and the errors a client meets."""
import json
import math
import os
import pathlib

import pytest

from conftest import Server

openai = pytest.importorskip("openai")

HERE = pathlib.Path(__file__).resolve().parent
FIXTURE = HERE.parent / "fixtures" / "hf" / "qwen3_embedding"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
MODEL = "qwen3_embedding"
TOLERANCE = 2e-5  # as tests/model/embedding_model_test.cpp


def start_server(request, fixture, log):
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    if not os.path.exists(troupe):
        pytest.skip(f"no troupe binary at {troupe}")
    return Server(troupe, str(fixture), ["-t", "1"], log)


@pytest.fixture(scope="module")
def server(request, artifacts):
    s = start_server(request, FIXTURE, artifacts / "serve-embeddings.log")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0, timeout=60)


def assert_close(got, want):
    assert len(got) == len(want)
    worst = max(abs(a - b) for a, b in zip(got, want))
    assert worst < TOLERANCE, worst


def test_batch_matches_sentence_transformers(client):
    # No encoding_format: the client asks for base64 and decodes it.
    r = client.embeddings.create(model=MODEL, input=REFERENCE["texts"])
    assert r.object == "list" and r.model == MODEL
    assert [d.index for d in r.data] == list(range(len(REFERENCE["texts"])))
    for d, want in zip(r.data, REFERENCE["embeddings"]):
        assert_close(d.embedding, want)
    assert r.usage.prompt_tokens == sum(len(t) for t in REFERENCE["token_ids"])
    assert r.usage.total_tokens == r.usage.prompt_tokens


def test_float_encoding_and_dimensions(client):
    n = REFERENCE["matryoshka_dims"]
    r = client.embeddings.create(model=MODEL, input=REFERENCE["texts"][1], encoding_format="float", dimensions=n)
    assert_close(r.data[0].embedding, REFERENCE["matryoshka_embeddings"][1])
    assert math.isclose(sum(x * x for x in r.data[0].embedding), 1.0, rel_tol=1e-5)


def test_token_ids(client):
    r = client.embeddings.create(model=MODEL, input=REFERENCE["token_ids"][:2], encoding_format="float")
    for d, want in zip(r.data, REFERENCE["embeddings"][:2]):
        assert_close(d.embedding, want)


def test_errors_name_the_field(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=MODEL, input=[[1] * 300])  # the context holds 256
    assert e.value.body["param"] == "input"
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=MODEL, input="a", dimensions=1000)
    assert e.value.body["param"] == "dimensions"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="hello", max_tokens=4)
    assert "embedding model" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="text-embedding-3-small", input="a")
    assert e.value.body["param"] == "model"
    # The server still answers.
    assert len(client.embeddings.create(model=MODEL, input="a").data) == 1


# A BERT encoder (bge's recipe: CLS pooling, normalized, WordPiece), the
# whole batch at once: each input is computed in one step.
BERT = HERE.parent / "fixtures" / "hf" / "bert_embedding_cls"
BERT_REFERENCE = json.loads((BERT / "reference.json").read_text())


@pytest.fixture(scope="module")
def bert_client(request, artifacts):
    s = start_server(request, BERT, artifacts / "serve-bert.log")
    yield openai.OpenAI(base_url=s.url("/v1"), api_key="unused", max_retries=0, timeout=60)
    s.stop()


def test_bert_encoder_matches_sentence_transformers(bert_client):
    r = bert_client.embeddings.create(model="bert_embedding_cls", input=BERT_REFERENCE["texts"])
    for d, want in zip(r.data, BERT_REFERENCE["embeddings"]):
        assert_close(d.embedding, want)
    assert r.usage.prompt_tokens == sum(len(t) for t in BERT_REFERENCE["token_ids"])
    with pytest.raises(openai.BadRequestError) as e:
        bert_client.embeddings.create(model="bert_embedding_cls", input=[[5] * 129])  # 128 positions
    assert e.value.body["param"] == "input"
    with pytest.raises(openai.BadRequestError) as e:
        bert_client.completions.create(model="bert_embedding_cls", prompt="hello", max_tokens=4)
    assert "embedding model" in e.value.body["message"]


# A cross-encoder (ms-marco-MiniLM's recipe: BertForSequenceClassification,
# saved by sentence-transformers' CrossEncoder, tools/fixtures/
# make_reranker_models.py) over HTTP: /v1/rerank as Jina's and Cohere's
# clients post it, /v1/score as vLLM's, each score CrossEncoder's.
RERANKER = HERE.parent / "fixtures" / "hf" / "bert_reranker"
RERANKER_REFERENCE = json.loads((RERANKER / "reference.json").read_text())


@pytest.fixture(scope="module")
def reranker(request, artifacts):
    s = start_server(request, RERANKER, artifacts / "serve-reranker.log")
    yield s
    s.stop()


class Reply:
    def __init__(self, status_code, text):
        self.status_code = status_code
        self.text = text

    def json(self):
        return json.loads(self.text)


def post(server, path, body):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(server.url(path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return Reply(r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.read().decode())


def test_rerank_matches_cross_encoder(reranker):
    ref = RERANKER_REFERENCE
    query = ref["pairs"][0][0]
    docs = [d for q, d in ref["pairs"] if q == query]
    r = post(reranker, "/v1/rerank", {"model": "bert_reranker", "query": query, "documents": docs, "top_n": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["results"]) == 2
    best = sorted(range(len(docs)), key=lambda i: -ref["scores"][i])[:2]
    assert [x["index"] for x in body["results"]] == best
    for x in body["results"]:
        assert abs(x["relevance_score"] - ref["scores"][x["index"]]) < TOLERANCE
        assert x["document"]["text"] == docs[x["index"]]
    assert body["usage"]["prompt_tokens"] == sum(len(ref["token_ids"][i]) for i in range(len(docs)))


def test_score_matches_cross_encoder(reranker):
    ref = RERANKER_REFERENCE
    firsts = [q for q, d in ref["pairs"]]
    seconds = [d for q, d in ref["pairs"]]
    r = post(reranker, "/v1/score", {"text_1": firsts, "text_2": seconds})
    assert r.status_code == 200, r.text
    got = [d["score"] for d in r.json()["data"]]
    assert max(abs(a - b) for a, b in zip(got, ref["scores"])) < TOLERANCE
    bad = post(reranker, "/v1/rerank", {"query": "q", "documents": []})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "documents"
    refused = post(reranker, "/v1/embeddings", {"input": "a"})
    assert refused.status_code == 400 and "cross-encoder" in refused.json()["error"]["message"]


# A causal reranker named by its LM head's rows (vLLM's classifier_from_token):
# tests/fixtures/hf/qwen3_reranker without the README that tells Troupe it is
# a Qwen3-Reranker, served with --classifier-from-token no,yes and its model
# card's prompt as --rerank-template; the scores transformers computed.
QWEN3_RERANKER = HERE.parent / "fixtures" / "hf" / "qwen3_reranker"
QWEN3_PROMPT = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
                "<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n"
                "<Query>: {query}\n<Document>: {document}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.fixture(scope="module")
def token_reranker(request, artifacts, tmp_path_factory):
    import shutil
    troupe = os.path.abspath(request.config.getoption("--troupe"))
    if not os.path.exists(troupe):
        pytest.skip(f"no troupe binary at {troupe}")
    model = tmp_path_factory.mktemp("lm") / "lm"
    shutil.copytree(QWEN3_RERANKER, model, ignore=shutil.ignore_patterns("README.md", "reference.json"))
    prompt = model.parent / "prompt.txt"
    prompt.write_text(QWEN3_PROMPT)
    s = Server(troupe, str(model), ["-t", "1", "--classifier-from-token", "no,yes", "--rerank-template", str(prompt)],
               artifacts / "serve-token-reranker.log")
    yield s
    s.stop()


def test_classifier_from_token_matches_the_model_card(token_reranker):
    ref = json.loads((QWEN3_RERANKER / "reference.json").read_text())
    query = ref["pairs"][0][0]
    indices = [i for i, (q, d) in enumerate(ref["pairs"]) if q == query]
    r = post(token_reranker, "/v1/rerank", {"query": query, "documents": [ref["pairs"][i][1] for i in indices]})
    assert r.status_code == 200, r.text
    for x in r.json()["results"]:
        assert abs(x["relevance_score"] - ref["scores"][indices[x["index"]]]) < TOLERANCE
