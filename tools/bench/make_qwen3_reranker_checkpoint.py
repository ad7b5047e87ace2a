#!/usr/bin/env python3
"""Writes a Qwen3-Reranker-0.6B-shaped reranker for the rerank benchmark
(tools/bench/rerank_vs_llama_cpp.py): random weights (no model hub here)
in the release's shape (make_embedding_checkpoint.qwen3_06b: 28 layers,
1024 wide, tied, Qwen3's 151,669-token vocabulary), the real Qwen3
tokenizer from ../shared/tokenizers/qwen3 (as the release ships it: it
adds no tokens to a text), and a README with the release's
"# Qwen3-Reranker" heading, by which llama.cpp's converter and Troupe
know the checkpoint. Saved as OUT/ and converted by llama.cpp's own
converter into OUT.<type>.gguf (rank pooling, the "yes" and "no" rows as
cls.output, the card's prompt as the `rerank` template).

    /work/refenv/bin/python tools/bench/make_qwen3_reranker_checkpoint.py \\
        --llama-cpp /path/to/llama.cpp --out ~/.cache/troupe/bench/qwen3-reranker-0.6b --outtype q8_0
"""
import argparse
import shutil
from pathlib import Path

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from make_embedding_checkpoint import ROOT, convert, qwen3_06b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--outtype", default="q8_0", help="the GGUF's type (llama.cpp converter's --outtype)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    args = ap.parse_args()

    tok = Tokenizer.from_file(str(args.shared / "tokenizers" / "qwen3" / "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    model = qwen3_06b(eos)
    shutil.rmtree(args.out, ignore_errors=True)
    model.save_pretrained(args.out)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>").save_pretrained(
        args.out)
    (args.out / "README.md").write_text("# Qwen3-Reranker-0.6B (random weights, for benchmarks)\n\nMade by "
                                        "tools/bench/make_qwen3_reranker_checkpoint.py.\n")
    convert(args.llama_cpp, args.out, args.outtype)


if __name__ == "__main__":
    main()
