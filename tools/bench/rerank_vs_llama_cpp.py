#!/usr/bin/env python3
"""Rerank throughput of `troupe serve` against llama.cpp's llama-server
(--reranking) on the same GGUF cross-encoder, in one run on one machine,
through the same endpoint (POST /v1/rerank, Jina's shape, which both serve).

Each round starts one server, warms it up, then C clients post their share
of Q queries, each with D documents of about L words; the round reports
pairs/s and tokens/s (prompt tokens as each server counts them). Engines
alternate which goes first from round to round; the table gives each
engine's median and the median and range of the per-round ratios. The
servers' scores are compared: llama-server returns the classifier's logit,
Troupe its sigmoid (sentence-transformers' CrossEncoder score), so
llama-server's are put through the sigmoid first, and a speed figure of a
server that computes something else would mean nothing. For a
Qwen3-Reranker (tools/bench/make_qwen3_reranker_checkpoint.py) llama-server
returns the softmax's "yes" probability, which is Troupe's score as it is:
pass --llama-score probability. Use a RoBERTa reranker
(tools/bench/make_reranker_checkpoint.py) or a Qwen3-Reranker: for them
both servers build the same input and head. The llama.cpp build is the caller's: this
project neither builds nor ships it.

    tools/bench/rerank_vs_llama_cpp.py --troupe build/release/troupe \\
        --llama-server /path/to/llama-server --model roberta-reranker.f16.gguf \\
        --threads 1,2 --queries 8 --documents 8 --words 80 --clients 2 --rounds 3
"""
import argparse
import math

from server_compare import add_common_args, llama_server_args, post, print_table, run_clients, run_rounds, start, texts


def measure(base, queries, docs, clients, logits):
    scores = [None] * len(queries)
    tokens = [0] * clients

    def client(k):
        for j in range(k, len(queries), clients):
            r = post(base + "/v1/rerank", {"query": queries[j], "documents": docs[j], "top_n": len(docs[j])})
            tokens[k] += r["usage"]["prompt_tokens"] if "usage" in r else 0
            got = [0.0] * len(docs[j])
            for x in r["results"]:
                s = x["relevance_score"]
                got[x["index"]] = 1.0 / (1.0 + math.exp(-s)) if logits else s
            scores[j] = got

    seconds = run_clients(clients, client)
    return sum(len(d) for d in docs) / seconds, sum(tokens) / seconds, scores


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "a GGUF cross-encoder (cls.output)")
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--documents", type=int, default=8, help="documents per query")
    ap.add_argument("--words", type=int, default=80, help="about this many words per document")
    ap.add_argument("--llama-score", choices=["logit", "probability"], default="logit",
                    help="what llama-server's relevance_score is: a classifier's logit (a cross-encoder), or "
                         "already a probability (Qwen3-Reranker's softmax)")
    args = ap.parse_args()

    queries = texts(args.queries, 8, seed=3)
    docs = [texts(args.documents, args.words, seed=100 + q) for q in range(args.queries)]

    def run_engine(engine, threads):
        llama = engine == "llama.cpp"
        if not llama:
            cmd = [args.troupe, "serve", "-m", args.model, "-t", str(threads), *args.troupe_arg]
            env = dict(kv.split("=", 1) for kv in args.troupe_env)
        else:
            cmd, env = llama_server_args(args, threads, "--reranking"), {}
        proc, base = start(cmd, env, {"query": "ready?", "documents": ["yes"]}, "/v1/rerank")
        try:
            logits = llama and args.llama_score == "logit"
            measure(base, texts(2, 8, seed=98), [texts(args.documents, args.words, seed=99)] * 2, 1, logits)
            return measure(base, queries, docs, args.clients, logits)
        finally:
            proc.terminate()
            proc.wait(timeout=60)

    def agreement(ours, theirs):
        worst = max(abs(a - b) for qa, qb in zip(ours, theirs) for a, b in zip(qa, qb))
        if worst > 1e-2:
            raise SystemExit(f"the servers' scores differ by up to {worst:.5f}")
        return f"scores agree to {worst:.2e}"

    rows = run_rounds(args, run_engine, agreement, "pairs")
    print(f"\n{args.queries} queries x {args.documents} documents of ~{args.words} words, {args.clients} clients, "
          f"{args.rounds} rounds{', Troupe with ' + ' '.join(args.troupe_env + args.troupe_arg) if args.troupe_env or args.troupe_arg else ''}\n")
    print_table(rows, "pairs")


if __name__ == "__main__":
    main()
