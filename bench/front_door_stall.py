#!/usr/bin/env python3
"""Does tokenizing a huge prompt stall other connections' streams?

Starts `troupe serve` (the binary given), opens one streamed completion
(ignore_eos, long), and measures the gaps between its SSE events, first
undisturbed, then while other clients keep posting 100,000-character prompts
(refused for their length, but only once tokenized). Prints P50/P99 of the
gaps in both phases and their ratio. Run it with two binaries (before and
after a change) in one session to compare them on the same machine.

  bench/front_door_stall.py --troupe build/release/troupe [--model M.gguf] [--seconds 8]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import requests


def start(troupe, model):
    proc = subprocess.Popen([troupe, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = None
    while base is None:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("troupe serve exited early")
        m = re.search(r"listening on (http://[\d.]+:\d+)/", line)
        if m:
            base = m.group(1)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if requests.get(base + "/ready", timeout=2).status_code == 200:
                return proc, base
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise SystemExit("not ready in time")


def stream_gaps(base, model_id, seconds):
    """Gaps (s) between the SSE events of one long streamed completion."""
    body = {"model": model_id, "prompt": "Once upon a time", "max_tokens": 4000, "stream": True,
            "ignore_eos": True, "temperature": 0}
    gaps, last = [], None
    end = time.time() + seconds
    with requests.post(base + "/v1/completions", json=body, stream=True, timeout=60) as r:
        for line in r.iter_lines(chunk_size=None):
            if not line.startswith(b"data:"):
                continue
            now = time.perf_counter()
            if last is not None:
                gaps.append(now - last)
            last = now
            if time.time() > end:
                break
    return gaps


def flood(base, model_id, stop, counts):
    text = ("The quick brown fox jumps over the lazy dog 0123456789. " * 2000)[:100000]
    while not stop.is_set():
        r = requests.post(base + "/v1/completions", json={"model": model_id, "prompt": text, "max_tokens": 1},
                          timeout=60)
        counts[r.status_code] = counts.get(r.status_code, 0) + 1


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--troupe", required=True)
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/troupe/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--flooders", type=int, default=2)
    a = ap.parse_args()
    proc, base = start(a.troupe, a.model)
    try:
        model_id = requests.get(base + "/v1/models", timeout=5).json()["data"][0]["id"]
        calm = stream_gaps(base, model_id, a.seconds)
        stop, counts = threading.Event(), {}
        threads = [threading.Thread(target=flood, args=(base, model_id, stop, counts)) for _ in range(a.flooders)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        busy = stream_gaps(base, model_id, a.seconds)
        stop.set()
        for t in threads:
            t.join()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(f"binary: {a.troupe}")
    print(f"undisturbed: {len(calm)} gaps, P50 {pct(calm, 0.5):.1f} ms, P99 {pct(calm, 0.99):.1f} ms")
    print(f"100k-char prompts arriving ({sum(counts.values())} posted, statuses {counts}): "
          f"{len(busy)} gaps, P50 {pct(busy, 0.5):.1f} ms, P99 {pct(busy, 0.99):.1f} ms")
    print(f"P99 ratio (disturbed / undisturbed): {pct(busy, 0.99) / pct(calm, 0.99):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
