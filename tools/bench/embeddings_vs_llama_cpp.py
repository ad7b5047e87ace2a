#!/usr/bin/env python3
"""Embedding throughput of `troupe serve` against llama.cpp's llama-server
(--embedding) on the same GGUF file, in one run on one machine, through the
same OpenAI endpoint (POST /v1/embeddings).

Each round starts one server, warms it up, then C clients post their share
of N inputs of about L tokens each, B inputs per request, and the round
reports inputs/s and tokens/s (prompt tokens as each server counts them);
engines alternate which goes first from round to round, and the table gives
each engine's median and the median and range of the per-round ratios. The
vectors of both servers are compared (cosine similarity): a speed figure of
a server that computes something else would mean nothing. The llama.cpp
build is the caller's: this project neither builds nor ships it.

    tools/bench/embeddings_vs_llama_cpp.py --troupe build/release/troupe \\
        --llama-server /path/to/llama-server --model qwen3-embedding-shaped.gguf \\
        --threads 1,2 --inputs 64 --tokens 128 --batch 8 --clients 2 --rounds 3 [--troupe-env TROUPE_NO_AMX=1]
"""
import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import threading
import time
import urllib.request

WORDS = ("actor message stage token embedding vector search query passage model layer cache batch step "
         "scheduler sampler kernel memory thread request server client latency throughput prefill").split()


def texts(n, n_words, seed=7):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(n_words)) for _ in range(n)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(base, body, timeout=600):
    req = urllib.request.Request(base + "/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_ready(base, proc, limit=600):
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            post(base, {"input": "ready?"}, timeout=30)
            return
        except Exception:  # noqa: BLE001 -- still loading
            time.sleep(0.5)
    raise RuntimeError("the server did not answer in time")


def start(engine, args, threads):
    port = free_port()
    if engine == "troupe":
        cmd = [args.troupe, "serve", "-m", args.model, "--port", str(port), "-t", str(threads), "--embedding"]
    else:
        ctx = args.clients * 2048
        cmd = [args.llama_server, "-m", args.model, "--port", str(port), "-t", str(threads), "--embedding",
               "-c", str(ctx), "-np", str(args.clients), "-b", "2048", "-ub", "2048"]
    env = dict(os.environ)
    if engine == "troupe":
        env.update(kv.split("=", 1) for kv in args.troupe_env)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"
    wait_ready(base, proc)
    return proc, base


def measure(base, inputs, batch, clients):
    chunks = [inputs[i:i + batch] for i in range(0, len(inputs), batch)]
    vectors = [None] * len(inputs)
    tokens = [0] * clients
    errors = []

    def client(k):
        try:
            for j in range(k, len(chunks), clients):
                r = post(base, {"input": chunks[j], "encoding_format": "float"})
                tokens[k] += r["usage"]["prompt_tokens"]
                for d in r["data"]:
                    vectors[j * batch + d["index"]] = d["embedding"]
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return len(inputs) / seconds, sum(tokens) / seconds, vectors


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--troupe", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", required=True, help="a GGUF embedding model (with pooling_type)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128, help="about this many tokens per input")
    ap.add_argument("--batch", type=int, default=8, help="inputs per request")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--troupe-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment of the Troupe server (TROUPE_NO_AMX=1: no AMX tiles)")
    args = ap.parse_args()

    inputs = texts(args.inputs, args.tokens)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        per = {"troupe": [], "llama.cpp": []}
        ratios = []
        for rnd in range(args.rounds):
            order = ["troupe", "llama.cpp"] if rnd % 2 == 0 else ["llama.cpp", "troupe"]
            got = {}
            for engine in order:
                proc, base = start(engine, args, threads)
                try:
                    # Warm-up on other texts: a measured input must not be in a prefix cache.
                    measure(base, texts(args.batch, args.tokens, seed=99), args.batch, 1)
                    got[engine] = measure(base, inputs, args.batch, args.clients)
                finally:
                    proc.terminate()
                    proc.wait(timeout=60)
                per[engine].append(got[engine][:2])
            worst = min(cosine(a, b) for a, b in zip(got["troupe"][2], got["llama.cpp"][2]))
            if worst < 0.999:
                raise SystemExit(f"the servers' vectors differ: cosine similarity down to {worst:.6f}")
            ratios.append(got["troupe"][0] / got["llama.cpp"][0])
            print(f"threads {threads} round {rnd}: troupe {got['troupe'][0]:.2f} inputs/s, llama.cpp "
                  f"{got['llama.cpp'][0]:.2f} inputs/s, vectors agree to cosine {worst:.6f}", flush=True)
        med = {e: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for e, v in per.items()}
        rows.append((threads, med, statistics.median(ratios), min(ratios), max(ratios)))

    print(f"\n{args.inputs} inputs of ~{args.tokens} words, {args.batch} per request, {args.clients} clients, "
          f"{args.rounds} rounds{', Troupe with ' + ' '.join(args.troupe_env) if args.troupe_env else ''}\n")
    print("| threads | llama.cpp inputs/s | Troupe inputs/s | llama.cpp tok/s | Troupe tok/s | Troupe / llama.cpp |")
    print("|---|---|---|---|---|---|")
    for threads, med, ratio, lo, hi in rows:
        print(f"| {threads} | {med['llama.cpp'][0]:.2f} | {med['troupe'][0]:.2f} | {med['llama.cpp'][1]:.0f} | "
              f"{med['troupe'][1]:.0f} | {ratio:.2f}x ({lo:.2f}-{hi:.2f}) |")


if __name__ == "__main__":
    main()
