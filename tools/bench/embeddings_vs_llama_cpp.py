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

from server_compare import add_common_args, llama_server_args, post, print_table, run_clients, run_rounds, start, texts


def measure(base, inputs, batch, clients):
    chunks = [inputs[i:i + batch] for i in range(0, len(inputs), batch)]
    vectors = [None] * len(inputs)
    tokens = [0] * clients

    def client(k):
        for j in range(k, len(chunks), clients):
            r = post(base + "/v1/embeddings", {"input": chunks[j], "encoding_format": "float"})
            tokens[k] += r["usage"]["prompt_tokens"]
            for d in r["data"]:
                vectors[j * batch + d["index"]] = d["embedding"]

    seconds = run_clients(clients, client)
    return len(inputs) / seconds, sum(tokens) / seconds, vectors


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "a GGUF embedding model (with pooling_type)")
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128, help="about this many tokens per input")
    ap.add_argument("--batch", type=int, default=8, help="inputs per request")
    args = ap.parse_args()

    inputs = texts(args.inputs, args.tokens)

    def run_engine(engine, threads):
        if engine == "troupe":
            cmd = [args.troupe, "serve", "-m", args.model, "-t", str(threads), "--embedding"]
            env = dict(kv.split("=", 1) for kv in args.troupe_env)
        else:
            cmd, env = llama_server_args(args, threads, "--embedding"), {}
        proc, base = start(cmd, env, {"input": "ready?"}, "/v1/embeddings")
        try:
            # Warm-up on other texts: a measured input must not be in a prefix cache.
            measure(base, texts(args.batch, args.tokens, seed=99), args.batch, 1)
            return measure(base, inputs, args.batch, args.clients)
        finally:
            proc.terminate()
            proc.wait(timeout=60)

    def agreement(ours, theirs):
        worst = min(cosine(a, b) for a, b in zip(ours, theirs))
        if worst < 0.999:
            raise SystemExit(f"the servers' vectors differ: cosine similarity down to {worst:.6f}")
        return f"vectors agree to cosine {worst:.6f}"

    rows = run_rounds(args, run_engine, agreement, "inputs")
    print(f"\n{args.inputs} inputs of ~{args.tokens} words, {args.batch} per request, {args.clients} clients, "
          f"{args.rounds} rounds{', Troupe with ' + ' '.join(args.troupe_env) if args.troupe_env else ''}\n")
    print_table(rows, "inputs")


if __name__ == "__main__":
    main()
