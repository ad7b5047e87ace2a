#!/usr/bin/env python3
"""How closely `troupe embed` agrees with sentence-transformers at full size:
each model path (a sentence-transformers directory, or a GGUF converted
from it) embeds the same texts through `troupe embed`, and each vector is
compared with what sentence-transformers' own `encode` gives for the
directory (cosine similarity, largest component difference, token counts).

    /work/refenv/bin/python tools/bench/embedding_agreement.py --troupe build/release/troupe \\
        --reference ~/.cache/troupe/bench/bge-small-shaped ~/.cache/troupe/bench/bge-small-shaped \\
        ~/.cache/troupe/bench/bge-small-shaped.f16.gguf
"""
import argparse
import json
import subprocess

import numpy as np
from sentence_transformers import SentenceTransformer

TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "Actors exchange messages; the scheduler batches requests.",
         "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 accents and punctuation!",
         " ".join(["embedding"] * 100)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--troupe", required=True)
    ap.add_argument("--reference", required=True, help="the sentence-transformers directory")
    ap.add_argument("--threads", default="2")
    ap.add_argument("models", nargs="+", help="what troupe embeds: the directory, its GGUF conversions")
    args = ap.parse_args()
    st = SentenceTransformer(args.reference, device="cpu")
    want = st.encode(TEXTS, convert_to_numpy=True, batch_size=1)
    n_tokens = [len(st.tokenizer(t)["input_ids"]) for t in TEXTS]
    for model in args.models:
        out = subprocess.run([args.troupe, "embed", "-m", model, "-t", args.threads, *TEXTS], capture_output=True,
                             text=True, check=True).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        for i, r in enumerate(rows):
            v, w = np.array(r["embedding"]), want[i]
            cos = float(v @ w / np.linalg.norm(v) / np.linalg.norm(w))
            print(f"{model}: text {i}: tokens {r['tokens']} (sentence-transformers {n_tokens[i]}), "
                  f"cosine {cos:.6f}, largest difference {np.abs(v - w).max():.2e}")


if __name__ == "__main__":
    main()
