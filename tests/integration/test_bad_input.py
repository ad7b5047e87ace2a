"""Bad input and hard conditions over real sockets: 400s naming the field,
404/405, 413 for a body over the limit, malformed HTTP, 401 with --api-key,
UTF-8 never split in an SSE chunk, a client hanging up mid-stream (its
request cancelled and its KV freed, checked through /metrics), and a client
that stops reading (dropped, its request cancelled)."""
import json
import socket
import time

import pytest

requests = pytest.importorskip("requests")

MAX_BODY = 65536
SEND_QUEUE = 16384


@pytest.fixture(scope="module")
def srv(start_server):
    return start_server("--max-body", MAX_BODY, "--send-queue", SEND_QUEUE)


def post(srv, path, body, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(srv.url(path), data=data, headers={"Content-Type": "application/json"}, timeout=60, **kw)


def error(r):
    body = r.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize("body,param", [
    ('{"model": "stories260K", "prompt": ', None),
    ({"prompt": "x"}, "model"),
    ({"model": "gpt-4o", "prompt": "x"}, "model"),
    ({"model": "stories260K"}, "prompt"),
    ({"model": "stories260K", "prompt": "x", "max_tokens": "ten"}, "max_tokens"),
    ({"model": "stories260K", "prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"model": "stories260K", "prompt": "x", "max_tokens": 5000}, "max_tokens"),  # over --max-tokens
    ({"model": "stories260K", "prompt": "x", "max_tokens": 2100}, "max_tokens"),  # over the 2048-token context
    ({"model": "stories260K", "prompt": "x", "temperature": -1}, "temperature"),
    ({"model": "stories260K", "prompt": "x", "stop": [1]}, "stop[0]"),
    ({"model": "stories260K", "prompt": "x", "n": 100}, "n"),
    ({"model": "stories260K", "prompt": "Once upon a time " * 600}, "prompt"),
])
def test_completions_400_names_the_field(srv, body, param):
    r = post(srv, "/v1/completions", body)
    assert r.status_code == 400, r.text
    e = error(r)
    assert e["type"] == "invalid_request_error"
    assert e["param"] == param
    if param:
        assert param.split("[")[0] in e["message"] or "context" in e["message"]


@pytest.mark.parametrize("body,param", [
    ({"model": "stories260K"}, "messages"),
    ({"model": "stories260K", "messages": []}, "messages"),
    ({"model": "stories260K", "messages": [{"role": "user"}]}, "messages[0].content"),
    ({"model": "stories260K", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"model": "stories260K", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 50,
      "logprobs": True}, "top_logprobs"),
])
def test_chat_400_names_the_field(srv, body, param):
    r = post(srv, "/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    assert error(r)["param"] == param


def test_unknown_fields_are_ignored(srv):
    r = post(srv, "/v1/completions", {"model": "stories260K", "prompt": "x", "max_tokens": 2,
                                      "a_future_field": {"nested": [1, 2]}, "user": "me"})
    assert r.status_code == 200, r.text


def test_not_found_and_wrong_method(srv):
    r = requests.get(srv.url("/v2/nothing"), timeout=10)
    assert r.status_code == 404 and error(r)["type"] == "not_found_error"
    r = requests.get(srv.url("/v1/chat/completions"), timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"


def test_body_over_the_limit_is_413(srv):
    big = json.dumps({"model": "stories260K", "prompt": "x" * (MAX_BODY * 2)})
    r = post(srv, "/v1/completions", big)
    assert r.status_code == 413
    assert error(r)["code"] == "request_too_large"
    # The server is fine afterwards.
    assert requests.get(srv.url("/health"), timeout=10).status_code == 200


def test_malformed_http_is_400(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400")


def test_api_key(start_server):
    keyed = start_server("--api-key", "t0ps3cret")
    body = {"model": "stories260K", "prompt": "x", "max_tokens": 2}
    r = post(keyed, "/v1/completions", body)
    assert r.status_code == 401 and error(r)["type"] == "authentication_error"
    assert r.headers["WWW-Authenticate"] == "Bearer"
    r = requests.post(keyed.url("/v1/completions"), json=body, timeout=60,
                      headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    r = requests.post(keyed.url("/v1/completions"), json=body, timeout=60,
                      headers={"Authorization": "Bearer t0ps3cret"})
    assert r.status_code == 200
    assert requests.get(keyed.url("/v1/models"), timeout=10).status_code == 401
    assert requests.get(keyed.url("/health"), timeout=10).status_code == 200


def sse_payloads(raw):
    """The data lines of an SSE body, as raw bytes."""
    return [line[len(b"data: "):] for line in raw.split(b"\n\n") if line.startswith(b"data: ")]


def test_utf8_is_never_split_in_a_chunk(srv):
    # A prompt full of multi-byte characters (byte-fallback tokens) and hot,
    # unfiltered sampling: many byte tokens come out, split characters too.
    total = 0
    for seed in range(4):
        r = requests.post(srv.url("/v1/completions"), timeout=60, stream=True, json={
            "model": "stories260K", "prompt": "héllo wörld ✓ 😀 日本 ", "max_tokens": 200, "temperature": 2.0,
            "seed": seed, "stream": True, "ignore_eos": True})
        raw = r.raw.read()
        for payload in sse_payloads(raw):
            if payload == b"[DONE]":
                continue
            text = json.loads(payload.decode("utf-8", "strict"))["choices"][0]["text"]
            text.encode("utf-8", "strict")  # no lone surrogates either
            total += 1
    assert total > 100


def test_hang_up_mid_stream_cancels_and_frees_kv(srv):
    m = srv.metrics()
    cancelled_before = m['troupe_requests_finished_total{reason="cancelled"}']
    gone_before = m['troupe_client_disconnects_total{reason="closed"}']
    body = json.dumps({"model": "stories260K", "prompt": "Once", "max_tokens": 480, "stream": True,
                       "ignore_eos": True, "temperature": 0.8}).encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(4096)
        assert got.startswith(b"HTTP/1.1 200")
    srv.wait_metric('troupe_requests_finished_total{reason="cancelled"}', lambda v: v > cancelled_before)
    srv.wait_metric('troupe_client_disconnects_total{reason="closed"}', lambda v: v > gone_before)
    srv.wait_metric('troupe_kv_blocks{state="used"}', lambda v: v == 0)
    srv.wait_metric("troupe_requests_running", lambda v: v == 0)


def test_a_client_that_stops_reading_is_dropped(srv):
    before = srv.metrics()['troupe_client_disconnects_total{reason="slow_reader"}']
    body = json.dumps({"model": "stories260K", "prompt": "Once", "max_tokens": 480, "n": 8, "stream": True,
                       "ignore_eos": True, "logprobs": 5}).encode()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.port))
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        # Read nothing: the server's queue for this client fills up.
        srv.wait_metric('troupe_client_disconnects_total{reason="slow_reader"}', lambda v: v > before, timeout=60)
        srv.wait_metric('troupe_kv_blocks{state="used"}', lambda v: v == 0)
        srv.wait_metric("troupe_requests_running", lambda v: v == 0)
        # Memory stayed bounded: the server answers as usual.
        assert requests.get(srv.url("/health"), timeout=10).status_code == 200
    finally:
        s.close()


def test_expect_100_continue(srv):
    """curl sends bodies over 1 KiB only after "100 Continue"; a body over the
    limit is refused before it is sent."""
    body = json.dumps({"model": "stories260K", "prompt": "x" * 2000, "max_tokens": 2}).encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        assert s.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 200")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY * 4))
        assert s.recv(4096).startswith(b"HTTP/1.1 413")
