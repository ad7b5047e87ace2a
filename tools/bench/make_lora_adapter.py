#!/usr/bin/env python3
"""Writes a LoRA adapter GGUF (llama.cpp's layout, as convert_lora_to_gguf.py
writes it) for a GGUF model: random A and B of rank --rank for every
attention and FFN projection of every layer, in f32, for benchmarks of what
running adapters unmerged costs (bench_generate --lora). The values are
noise; only the shapes and the work are real.

    python3 tools/bench/make_lora_adapter.py ~/.cache/troupe/bench/110m-q8_0.gguf --rank 16 \\
        --out ~/.cache/troupe/bench/110m-lora16.gguf
"""
import argparse
import re

import numpy as np
from gguf import GGUFReader, GGUFWriter

TARGETS = re.compile(r"blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    reader = GGUFReader(args.model)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(args.out, arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", args.alpha)
    rng = np.random.default_rng(0)
    n = 0
    for t in reader.tensors:
        if not TARGETS.fullmatch(t.name):
            continue
        n_in, n_out = int(t.shape[0]), int(t.shape[1])  # GGUF order: ne0 is the row length
        # numpy shapes are outermost first: a is [rank, n_in], b [n_out, rank].
        writer.add_tensor(t.name + ".lora_a", (rng.standard_normal((args.rank, n_in)) * 0.01).astype(np.float32))
        writer.add_tensor(t.name + ".lora_b", (rng.standard_normal((n_out, args.rank)) * 0.01).astype(np.float32))
        n += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"{args.out}: {n} matrices, rank {args.rank}")


if __name__ == "__main__":
    main()
