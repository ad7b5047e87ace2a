"""Graceful shutdown of `troupe serve` (issue 16, item 7): on SIGTERM the
server refuses new work (/ready 503 "draining", generation 503) while the
requests in flight finish within --shutdown-grace; past it, each remaining
one ends cleanly (SSE: a last chunk with finish_reason, an error event,
[DONE], the terminating chunk; WebSocket: a final per running id, then
close 1001); the process exits 0. A second signal exits at once."""
import asyncio
import json
import signal
import threading
import time

import pytest

from conftest import Server

requests = pytest.importorskip("requests")
websockets = pytest.importorskip("websockets")

# Long enough to outlast the grace periods below, short enough for the
# context (2048) and for three to fit in the KV pool at once.
LONG = {"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True,
        "stream": True}


def sse_events(resp):
    """(events, completed): the `data:` payloads of a stream, and whether the
    chunked body ended properly (a cut body raises in iter_lines)."""
    events = []
    try:
        for line in resp.iter_lines():
            if line.startswith(b"data: "):
                events.append(line[6:].decode())
        return events, True
    except requests.exceptions.RequestException:
        return events, False


def start_stream(url, body, started):
    out = {}

    def run():
        with requests.post(url, json=body, stream=True, timeout=120) as r:
            out["status"] = r.status_code
            it = r.iter_lines()
            events, completed = [], True
            try:
                for line in it:
                    if line.startswith(b"data: "):
                        events.append(line[6:].decode())
                        started.set()
            except requests.exceptions.RequestException:
                completed = False
            out["events"], out["completed"] = events, completed

    t = threading.Thread(target=run)
    t.start()
    return t, out


def wait_exit(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except Exception:
        proc.kill()
        proc.wait()
        raise AssertionError("troupe serve did not exit in time")


def test_running_requests_finish_within_the_grace_period(start_server):
    srv = start_server("--shutdown-grace", 60)
    started = threading.Event()
    body = LONG
    t, out = start_stream(srv.url("/v1/completions"), body, started)
    assert started.wait(30)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    # Draining: not ready, and new work is refused with a reason.
    ready = requests.get(srv.url("/ready"), timeout=5)
    assert ready.status_code == 503 and ready.json()["status"] == "draining"
    refused = requests.post(srv.url("/v1/completions"), json=dict(body, stream=False, max_tokens=4), timeout=10)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "server_shutting_down"
    assert int(refused.headers["Retry-After"]) >= 1
    t.join(60)
    assert out["status"] == 200 and out["completed"]
    assert out["events"][-1] == "[DONE]"
    last = json.loads(out["events"][-2])
    assert last["choices"][0]["finish_reason"] == "length"
    assert not any('"error"' in e for e in out["events"])
    assert wait_exit(srv.proc, 30) == 0


async def ws_two_requests(srv, started):
    ws = await websockets.connect(srv.ws_url())
    hello = json.loads(await ws.recv())
    assert hello["type"] == "hello"
    for rid in ("a", "b"):
        await ws.send(json.dumps({"type": "generate", "id": rid, "prompt": "Once", "max_tokens": 1500,
                                  "ignore_eos": True}))
    seen = set()
    while len(seen) < 2:
        f = json.loads(await ws.recv())
        if f["type"] == "token":
            seen.add(f["id"])
    started.set()
    finals = {}
    try:
        while True:
            f = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if f["type"] in ("final", "error"):
                finals[f["id"]] = f
    except websockets.exceptions.ConnectionClosed as e:
        code = e.rcvd.code if e.rcvd is not None else None
    return finals, code


def test_past_the_grace_period_every_request_ends_cleanly(start_server):
    srv = start_server("--shutdown-grace", 0.3)
    started = threading.Event()
    t, out = start_stream(srv.url("/v1/chat/completions"),
                          {"model": "stories260K", "messages": [{"role": "user", "content": "Hi"}],
                           "max_tokens": 1500, "ignore_eos": True, "stream": True}, started)
    ws_started = threading.Event()
    ws_out = {}
    ws_thread = threading.Thread(target=lambda: ws_out.update(r=asyncio.run(ws_two_requests(srv, ws_started))))
    ws_thread.start()
    assert started.wait(30) and ws_started.wait(30)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    t.join(60)
    ws_thread.join(60)
    # SSE: the last chunk carries finish_reason, then an error event, then
    # [DONE], and the chunked body is terminated (not cut).
    assert out["status"] == 200 and out["completed"], out
    ev = out["events"]
    assert ev[-1] == "[DONE]"
    err = json.loads(ev[-2])
    assert err["error"]["code"] == "server_shutting_down"
    last = json.loads(ev[-3])
    assert last["choices"][0]["finish_reason"] == "cancelled"
    # WebSocket: a final for every running id, then close 1001.
    finals, code = ws_out["r"]
    assert set(finals) == {"a", "b"}
    for f in finals.values():
        assert f["type"] == "final" and f["finish_reason"] == "cancelled"
    assert code == 1001
    assert wait_exit(srv.proc, 30) == 0
    assert time.monotonic() - t0 < 15  # the grace (0.3 s), not the generation


def test_a_second_signal_exits_at_once(request, artifacts):
    troupe = request.config.getoption("--troupe")
    model = request.config.getoption("--model")
    srv = Server(troupe, model, ["--shutdown-grace", "60"], artifacts / "serve-test_shutdown-second.log")
    started = threading.Event()
    t, out = start_stream(srv.url("/v1/completions"), LONG, started)
    try:
        assert started.wait(30)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert srv.proc.poll() is None  # draining, the request still runs
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGINT)
        code = wait_exit(srv.proc, 10)
        assert time.monotonic() - t0 < 3
        assert code == 128 + signal.SIGINT
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        srv.log.close()
        t.join(60)
