"""The `websockets` package against /v1/stream: several requests at once on
one connection, token and final frames, cancel by id, the message size limit
(close 1009 with a reason), and a connection dropped mid-stream freeing its
KV blocks (checked through /metrics)."""
import asyncio
import json

import pytest

websockets = pytest.importorskip("websockets")

MAX_MESSAGE = 4096


@pytest.fixture(scope="module")
def ws_server(start_server):
    return start_server("--ws-max-message", MAX_MESSAGE)


async def collect(ws, ids):
    """Frames until every id in `ids` has its final (or error) frame."""
    texts = {i: "" for i in ids}
    finals = {}
    while len(finals) < len(ids):
        f = json.loads(await asyncio.wait_for(ws.recv(), 60))
        if f["type"] == "token":
            texts[f["id"]] += f["text"]
        elif f["type"] in ("final", "error"):
            finals[f["id"]] = f
            if f["type"] == "final":
                texts[f["id"]] += f["text"]
    return texts, finals


def run(coro):
    return asyncio.run(coro)


def test_hello_and_concurrent_requests(ws_server, reference_text):
    prompts = {"a": "", "b": "Once upon a time", "c": "The little dog"}

    async def go():
        async with websockets.connect(ws_server.ws_url()) as ws:
            hello = json.loads(await ws.recv())
            assert hello["type"] == "hello" and hello["model"] == "stories260K"
            assert hello["max_message_bytes"] == MAX_MESSAGE
            for rid, prompt in prompts.items():
                await ws.send(json.dumps({"type": "generate", "id": rid, "prompt": prompt, "max_tokens": 60,
                                          "temperature": 0, "ignore_eos": True}))
            return await collect(ws, list(prompts))

    texts, finals = run(go())
    for rid in prompts:
        assert finals[rid]["type"] == "final"
        assert finals[rid]["finish_reason"] == "length"
        assert finals[rid]["usage"]["completion_tokens"] == 60
        assert finals[rid]["timing"]["tokens_per_second"] > 0
    # Interleaved on one connection, each request still gets its own greedy
    # text: the published one for the BOS-only prompt.
    assert reference_text.startswith(texts["a"]) and len(texts["a"]) > 100
    assert texts["b"] != texts["c"]


def test_same_text_as_http(ws_server):
    import urllib.request
    body = json.dumps({"model": "stories260K", "prompt": "Lily had a red ball", "max_tokens": 30,
                       "temperature": 0}).encode()
    req = urllib.request.Request(ws_server.url("/v1/completions"), body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        http_text = json.load(r)["choices"][0]["text"]

    async def go():
        async with websockets.connect(ws_server.ws_url()) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "generate", "id": "x", "prompt": "Lily had a red ball",
                                      "max_tokens": 30, "temperature": 0}))
            return await collect(ws, ["x"])

    texts, _ = run(go())
    assert texts["x"] == http_text


def test_cancel_one_of_two(ws_server):
    async def go():
        async with websockets.connect(ws_server.ws_url()) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "generate", "id": "long", "prompt": "Once", "max_tokens": 480,
                                      "ignore_eos": True, "temperature": 0.8}))
            await ws.send(json.dumps({"type": "generate", "id": "short", "prompt": "Tom", "max_tokens": 20,
                                      "ignore_eos": True}))
            tokens = 0
            while tokens < 3:
                f = json.loads(await asyncio.wait_for(ws.recv(), 60))
                tokens += f["type"] == "token" and f["id"] == "long"
            await ws.send(json.dumps({"type": "cancel", "id": "long"}))
            return await collect(ws, ["long", "short"])

    _, finals = run(go())
    assert finals["long"]["finish_reason"] == "cancelled"
    assert finals["long"]["usage"]["completion_tokens"] < 480
    assert finals["short"]["finish_reason"] == "length"


def test_errors_are_frames_and_the_connection_survives(ws_server):
    async def go():
        async with websockets.connect(ws_server.ws_url()) as ws:
            await ws.recv()
            await ws.send("{not json")
            bad_json = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "generate", "id": "t", "prompt": "x", "top_p": 3}))
            bad_field = json.loads(await ws.recv())
            await ws.send(b"\x00\x01binary")
            binary = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "generate", "id": "ok", "prompt": "x", "max_tokens": 3}))
            _, finals = await collect(ws, ["ok"])
            return bad_json, bad_field, binary, finals["ok"]

    bad_json, bad_field, binary, ok = run(go())
    assert bad_json["type"] == "error" and bad_json["id"] is None and bad_json["error"]["code"] == "invalid_json"
    assert bad_field["id"] == "t" and bad_field["error"]["param"] == "top_p"
    assert binary["type"] == "error"
    assert ok["type"] == "final"


def test_message_over_the_limit_closes_with_a_reason(ws_server):
    async def go():
        async with websockets.connect(ws_server.ws_url(), max_size=None) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "generate", "id": "big", "prompt": "x" * (MAX_MESSAGE * 2)}))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as e:
                while True:
                    await asyncio.wait_for(ws.recv(), 30)
            return e.value

    closed = run(go())
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1009
    assert str(MAX_MESSAGE) in closed.rcvd.reason
    assert ws_server.metrics()['troupe_client_disconnects_total{reason="message_too_big"}'] >= 1


def test_dropped_connection_frees_kv(ws_server):
    before = ws_server.metrics()['troupe_requests_finished_total{reason="cancelled"}']

    async def go():
        ws = await websockets.connect(ws_server.ws_url())
        await ws.recv()
        await ws.send(json.dumps({"type": "generate", "id": "gone", "prompt": "Once", "max_tokens": 480,
                                  "ignore_eos": True}))
        f = json.loads(await asyncio.wait_for(ws.recv(), 60))
        assert f["type"] == "token"
        ws.transport.abort()  # no close handshake: the client just vanishes

    run(go())
    ws_server.wait_metric('troupe_requests_finished_total{reason="cancelled"}', lambda v: v > before)
    ws_server.wait_metric('troupe_kv_blocks{state="used"}', lambda v: v == 0)
    ws_server.wait_metric("troupe_requests_running", lambda v: v == 0)
