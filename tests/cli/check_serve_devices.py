#!/usr/bin/env python3
"""`troupe serve` on each of several devices, end to end over HTTP: for
every device a server is started on a free port, /health answers, /ready
turns 200 once the model is on its device, and a
greedy /v1/completions request for the model /v1/models names gives the
same text streamed (SSE) and whole;
then the texts of all devices must be equal (stories260K: the GPU's sums in
another order still pick the same greedy tokens, as `troupe generate`
shows). CI runs it with the CPU twice; scripts/gpu-check with cpu and cuda.

  check_serve_devices.py TROUPE MODEL DEVICE[,DEVICE...]
"""
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

troupe, model, devices = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
PROMPT = "Once upon a time"
TOKENS = 48


def post(url, body, timeout=60):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def request(model_id, stream):
    return {"model": model_id, "prompt": PROMPT, "max_tokens": TOKENS, "temperature": 0, "stream": stream}


def streamed_text(url, model_id):
    text, done = "", False
    with post(url, request(model_id, True)) as r:
        assert r.status == 200, r.status
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            text += json.loads(data)["choices"][0].get("text", "")
    assert done, "the stream ended without [DONE]"
    return text


def whole_text(url, model_id):
    with post(url, request(model_id, False)) as r:
        assert r.status == 200, r.status
        return json.loads(r.read())["choices"][0]["text"]


def serve(device):
    """Starts a server, returns (process, base URL)."""
    p = subprocess.Popen([troupe, "serve", "-m", model, "--device", device, "--port", "0", "-t", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if "listening on " in line:
            return p, line.split("listening on ", 1)[1].strip().rstrip("/")
    p.kill()
    raise RuntimeError(f"troupe serve --device {device} did not start: {p.stderr.read()[-500:]}")


def wait_ready(base, limit=120):
    """/ready answers 503 while the model loads (the socket listens first)."""
    deadline = time.time() + limit
    while True:
        try:
            with urllib.request.urlopen(base + "/ready", timeout=30) as r:
                if r.status == 200:
                    return
        except urllib.error.HTTPError as e:
            if e.code != 503 or time.time() > deadline:
                raise
        time.sleep(0.2)


texts = {}
failures = []
for device in devices:
    try:
        proc, base = serve(device)
    except RuntimeError as e:
        failures.append(str(e))
        print(f"FAIL: {e}")
        continue
    try:
        with urllib.request.urlopen(base + "/health", timeout=30) as r:
            assert r.status == 200, f"/health {r.status}"
        wait_ready(base)
        with urllib.request.urlopen(base + "/v1/models", timeout=30) as r:
            model_id = json.loads(r.read())["data"][0]["id"]
        streamed = streamed_text(base + "/v1/completions", model_id)
        whole = whole_text(base + "/v1/completions", model_id)
        ok = streamed == whole and len(streamed) > 0
        print(("ok  " if ok else "FAIL") + f": {device}: {streamed!r}")
        if not ok:
            failures.append(f"{device}: streamed {streamed!r} but whole {whole!r}")
        texts.setdefault(streamed, []).append(device)
    except Exception as e:  # one device's failure is reported, the others still run
        failures.append(f"{device}: {e}")
        print(f"FAIL: {device}: {e}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            failures.append(f"{device}: the server did not stop within 30 s of SIGTERM")
if len(texts) > 1:
    failures.append("the devices' greedy texts differ: " + json.dumps(texts))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
