#!/usr/bin/env python3
"""Checks `troupe rerank` against sentence-transformers' CrossEncoder on a
cross-encoder directory: the largest score difference over a few (query,
document) pairs (short, long, accented) and the token counts of both.

    /work/refenv/bin/python tools/bench/rerank_agreement.py --troupe build/release/troupe DIR
"""
import argparse
import json
import subprocess

from sentence_transformers import CrossEncoder

QUERY = "how do actors exchange messages in a dataflow engine?"
DOCS = ["Actors exchange messages asynchronously; each actor owns its state.",
        "Paris is the capital of France, on the Seine.",
        "A reranker scores a query against each document and sorts them " * 6,
        "Café, naïve résumé: accents and punctuation!"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--troupe", required=True)
    ap.add_argument("model", help="a CrossEncoder directory")
    args = ap.parse_args()
    ce = CrossEncoder(args.model, device="cpu")
    want = ce.predict([(QUERY, d) for d in DOCS])
    out = subprocess.run([args.troupe, "rerank", "-m", args.model, "-q", QUERY, "-t", "1", *DOCS],
                         capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    worst = max(abs(x["score"] - float(w)) for x, w in zip(lines, want))
    print(f"largest score difference {worst:.2e}; tokens troupe {[x['tokens'] for x in lines]}, "
          f"transformers {[len(ce.tokenizer(QUERY, d)['input_ids']) for d in DOCS]}")


if __name__ == "__main__":
    main()
