"""Overload: a burst of ten times the server's capacity (2 running + 2
queued) on loopback. Past the bound the server answers 429 with Retry-After
at once, stays responsive, and the requests it admitted keep their latency
(they wait behind at most the queue, not behind the whole burst)."""
import concurrent.futures
import time

import pytest

requests = pytest.importorskip("requests")

RUNNING, QUEUE = 2, 2
BURST = 10 * (RUNNING + QUEUE)
BODY = {"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": True,
        "temperature": 0.8}


@pytest.fixture(scope="module")
def srv(start_server):
    return start_server("--max-running", RUNNING, "--max-queue", QUEUE)


def timed_post(url):
    t0 = time.monotonic()
    r = requests.post(url, json=BODY, timeout=120)
    return r, time.monotonic() - t0


def test_burst_gets_429_with_retry_after_and_admitted_latency_holds(srv):
    url = srv.url("/v1/completions")
    # Alone, one request takes this long.
    baseline = min(timed_post(url)[1] for _ in range(3))

    with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
        t0 = time.monotonic()
        futures = [pool.submit(timed_post, url) for _ in range(BURST)]
        # The server keeps answering while the burst is on.
        time.sleep(0.05)
        h0 = time.monotonic()
        assert requests.get(srv.url("/health"), timeout=5).status_code == 200
        health_s = time.monotonic() - h0
        results = [f.result() for f in futures]
        burst_s = time.monotonic() - t0

    ok = [(r, s) for r, s in results if r.status_code == 200]
    refused = [(r, s) for r, s in results if r.status_code == 429]
    assert len(ok) + len(refused) == BURST, [r.status_code for r, _ in results]
    assert len(ok) >= RUNNING + QUEUE
    assert len(refused) >= BURST // 2
    for r, seconds in refused:
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert seconds < 5  # refused at once, not after waiting
    for r, _ in ok:
        assert r.json()["usage"]["completion_tokens"] == 200
    # An admitted request waits behind at most the queue: a few request
    # times, not the whole burst's worth.
    worst = max(s for _, s in ok)
    assert worst < 4 * baseline + 2.0, (worst, baseline)
    assert health_s < 2.0
    assert burst_s < 120
    m = srv.metrics()
    assert m['troupe_requests_rejected_total{reason="overload"}'] >= len(refused)
    srv.wait_metric("troupe_requests_in_flight", lambda v: v == 0)
