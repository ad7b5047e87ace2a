#!/usr/bin/env python3
"""Checks `troupe rerank` against sentence-transformers' CrossEncoder on a
cross-encoder directory: the largest score difference over a few (query,
document) pairs (short, long, accented) and the token counts of both. With
--causal, against a Qwen3-Reranker's model-card procedure in transformers
(f32) instead: its prompt, the probability of "yes" against "no".

    /work/refenv/bin/python tools/bench/rerank_agreement.py --troupe build/release/troupe DIR [--causal]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

QUERY = "how do actors exchange messages in a dataflow engine?"
DOCS = ["Actors exchange messages asynchronously; each actor owns its state.",
        "Paris is the capital of France, on the Seine.",
        "A reranker scores a query against each document and sorts them " * 6,
        "Café, naïve résumé: accents and punctuation!"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--troupe", required=True)
    ap.add_argument("model", help="a CrossEncoder directory")
    ap.add_argument("--causal", action="store_true", help="a Qwen3-Reranker directory, scored as its model card does")
    ap.add_argument("--troupe-arg", action="append", default=[], help="an argument added to `troupe rerank`")
    args = ap.parse_args()
    if args.causal:
        want, counts = card_scores(args.model)
    else:
        from sentence_transformers import CrossEncoder
        ce = CrossEncoder(args.model, device="cpu")
        want = ce.predict([(QUERY, d) for d in DOCS])
        counts = [len(ce.tokenizer(QUERY, d)['input_ids']) for d in DOCS]
    out = subprocess.run([args.troupe, "rerank", "-m", args.model, "-q", QUERY, "-t", "1", *args.troupe_arg, *DOCS],
                         capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    worst = max(abs(x["score"] - float(w)) for x, w in zip(lines, want))
    print(f"largest score difference {worst:.2e}; tokens troupe {[x['tokens'] for x in lines]}, "
          f"transformers {counts}")


def card_scores(model_dir):
    """Qwen3-Reranker's scores as its model card computes them, in f32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    from make_causal_reranker_models import card_inputs, yes_probability
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = card_inputs(tok, [(QUERY, d) for d in DOCS], None)
    return [yes_probability(model, tok, i)[0] for i in ids], [len(i) for i in ids]


if __name__ == "__main__":
    main()
