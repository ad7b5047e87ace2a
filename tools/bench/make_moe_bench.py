#!/usr/bin/env python3
"""Writes a mixture-of-experts GGUF for benchmarks against llama.cpp: a
randomly initialised transformers model of the given shape, converted by
llama.cpp's own convert_hf_to_gguf.py (f16 matrices, f32 norms, biases and
sinks), with a 257-token byte-level vocabulary (the 256 byte symbols and one
merge, since llama.cpp wants merges) in place of the one it has no use for.

--arch gpt_oss (the default): GptOssForCausalLM. Optionally llama.cpp's
llama-quantize then writes the MXFP4_MOE file (experts in MXFP4, the rest as
it was), the type of the gpt-oss GGUFs users download. The published
gpt-oss-20b has 24 layers, hidden 2880, 32 experts of width 2880 and top-4
routing; the default shape keeps its ratios at a size this machine runs in
seconds.

--arch deepseek_v2: DeepseekV2ForCausalLM with DeepSeek-V2-Lite's ratios
(kv_lora_rank a quarter of the hidden size, nope 128 + rope 64 and values
128 per head; layer 0 dense; experts of width 11/16 of the hidden size, 2
shared) and a query latent of half the hidden size, as V2 and V3 have:
llama.cpp reads a file without one only when it has V2-Lite's 27 layers.

--arch lfm2: Lfm2ForCausalLM, not a mixture of experts but the hybrid of
short convolutions and attention that LiquidAI's models are: with 16
layers, attention at layers 2, 5, 8, 10, 12 and 14 as LFM2-350M and 1.2B
have it (else every third layer), the FFN 4x the hidden size (LFM2-350M's
4.5x, 1.2B's 4x). With --llama-quantize, the Q8_0 and Q4_K_M files too.

    python3 tools/bench/make_moe_bench.py --llama-cpp /path/to/llama.cpp \\
        [--llama-quantize /path/to/llama-quantize] --out ~/.cache/troupe/bench/oss-moe
    python3 tools/bench/make_moe_bench.py --arch deepseek_v2 --llama-cpp /path/to/llama.cpp \\
        --hidden 1024 --layers 8 --experts 32 --top-k 4 --heads 8 --out ~/.cache/troupe/bench/ds-moe

    python3 tools/bench/make_moe_bench.py --arch lfm2 --llama-cpp /path/to/llama.cpp \\
        --llama-quantize /path/to/llama-quantize --hidden 1024 --layers 16 --heads 16 --kv-heads 8 \\
        --out ~/.cache/troupe/bench/lfm2-350m

--arch qwen35: Qwen3_5ForCausalLM (the dense Qwen3.5 text model), three
Gated DeltaNet layers to each gated attention layer, 16 key and 16 value
heads of 128 in the DeltaNet, attention heads of 256 (2 kv heads), the FFN
3.5x the hidden size. With --llama-quantize, the Q8_0 and Q4_K_M files too.

    python3 tools/bench/make_moe_bench.py --arch qwen35 --llama-cpp /path/to/llama.cpp \\
        --llama-quantize /path/to/llama-quantize --hidden 1024 --layers 24 --heads 8 --kv-heads 2 \\
        --out ~/.cache/troupe/bench/qwen35-1k

--arch granite_hybrid: GraniteMoeHybridForCausalLM as Granite 4.0-H-Micro
lays it out (dense: the shared MLP alone): Mamba-2 layers (32 heads of 64,
state 128, one group, a 4-tap conv) with attention at two of every ten
layers, no RoPE, the MLP 4x the hidden size. With --llama-quantize, Q8_0 and
Q4_K_M too.

    python3 tools/bench/make_moe_bench.py --arch granite_hybrid --llama-cpp /path/to/llama.cpp \\
        --llama-quantize /path/to/llama-quantize --hidden 1024 --layers 20 --heads 16 --kv-heads 4 \\
        --out ~/.cache/troupe/bench/granite-h-1k

write oss-moe-f16.gguf (and oss-moe-mxfp4.gguf), ds-moe-f16.gguf,
lfm2-350m-{f16,q8_0,q4_k_m}.gguf, qwen35-1k-{f16,q8_0,q4_k_m}.gguf, granite-h-1k-{f16,q8_0,q4_k_m}.gguf. Needs
torch, transformers and numpy (tools/fixtures/README.md has the versions).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "fixtures"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", choices=["gpt_oss", "deepseek_v2", "lfm2", "qwen35", "granite_hybrid"], default="gpt_oss")
    ap.add_argument("--llama-cpp", required=True, help="a llama.cpp source tree (with convert_hf_to_gguf.py)")
    ap.add_argument("--llama-quantize", help="llama.cpp's llama-quantize, to also write the MXFP4_MOE file")
    ap.add_argument("--out", required=True, help="output prefix: <out>-f16.gguf, <out>-mxfp4.gguf")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    import torch
    from transformers import (DeepseekV2Config, DeepseekV2ForCausalLM, GptOssConfig, GptOssForCausalLM, Lfm2Config,
                              GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM, Lfm2ForCausalLM,
                              Qwen3_5ForCausalLM, Qwen3_5TextConfig)

    torch.manual_seed(args.seed)
    common = dict(vocab_size=257, hidden_size=args.hidden, num_hidden_layers=args.layers,
                  num_attention_heads=args.heads, num_experts_per_tok=args.top_k, max_position_embeddings=4096,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    if args.arch == "gpt_oss":
        config = GptOssConfig(**common, intermediate_size=args.hidden, num_key_value_heads=args.kv_heads, head_dim=64,
                              num_local_experts=args.experts, sliding_window=128)
        model = GptOssForCausalLM(config).eval()
    elif args.arch == "lfm2":
        attn = {2, 5, 8, 10, 12, 14} if args.layers == 16 else set(range(2, args.layers, 3))
        config = Lfm2Config(vocab_size=257, hidden_size=args.hidden, num_hidden_layers=args.layers,
                            num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                            max_position_embeddings=4096, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                            tie_word_embeddings=True, intermediate_size=args.hidden * 6,
                            block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0, block_multiple_of=256,
                            layer_types=["full_attention" if i in attn else "conv" for i in range(args.layers)])
        model = Lfm2ForCausalLM(config).eval()
    elif args.arch == "qwen35":
        config = Qwen3_5TextConfig(vocab_size=257, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                   num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, head_dim=256,
                                   intermediate_size=args.hidden * 7 // 2, max_position_embeddings=4096,
                                   bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=True,
                                   linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
                                   linear_value_head_dim=128, linear_conv_kernel_dim=4,
                                   rope_parameters=dict(rope_type="default", rope_theta=10000000.0,
                                                        partial_rotary_factor=0.25))
        config.architectures = ["Qwen3_5ForCausalLM"]
        model = Qwen3_5ForCausalLM(config).eval()
    elif args.arch == "granite_hybrid":
        attn = {i for i in range(args.layers) if i % 10 in (4, 9)}
        config = GraniteMoeHybridConfig(vocab_size=257, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                                        intermediate_size=args.hidden * 4, shared_intermediate_size=args.hidden * 4,
                                        num_local_experts=0, num_experts_per_tok=0, max_position_embeddings=4096,
                                        bos_token_id=1,
                                        eos_token_id=2, pad_token_id=0, tie_word_embeddings=True,
                                        position_embedding_type="nope",
                                        layer_types=["attention" if i in attn else "mamba" for i in range(args.layers)],
                                        mamba_n_heads=32, mamba_n_groups=1, mamba_d_state=128, mamba_d_head="auto",
                                        mamba_d_conv=4, mamba_expand=2, mamba_conv_bias=True)
        model = GraniteMoeHybridForCausalLM(config).eval()
    else:
        # V2-Lite's ratios: the expert width 1408 / 2048 of the hidden size,
        # the dense layer's 10944 / 2048, the kv rank 512 / 2048.
        config = DeepseekV2Config(**common, num_key_value_heads=args.heads, q_lora_rank=args.hidden // 2,
                                  kv_lora_rank=args.hidden // 4, qk_nope_head_dim=128, qk_rope_head_dim=64,
                                  v_head_dim=128, n_routed_experts=args.experts, n_shared_experts=2,
                                  moe_intermediate_size=args.hidden * 11 // 16, intermediate_size=args.hidden * 16 // 3,
                                  first_k_dense_replace=1, topk_method="greedy", n_group=1, topk_group=1)
        model = DeepseekV2ForCausalLM(config).eval()
    with torch.no_grad():  # spread weights: every expert gets routed to
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape) * (0.02 if p.dim() >= 2 else 0.1) + (1.0 if "norm" in name else 0.0))
    out = pathlib.Path(args.out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    f16 = out.with_name(out.name + "-f16.gguf")

    import make_gguf_arch_fixtures as conv_fixture  # its byte vocabulary and converter call
    llama_cpp = pathlib.Path(args.llama_cpp).resolve()
    sys.path.insert(0, str(llama_cpp))
    sys.path.insert(1, str(llama_cpp / "gguf-py"))
    import convert_hf_to_gguf as conv
    from conversion import get_model_class

    def bench_vocab(self):
        # The 256 byte symbols and one merge (two spaces): llama.cpp refuses a
        # byte-level vocabulary without merges.
        space = conv_fixture.byte_symbols()[ord(" ")]
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre("gpt-4o")
        self.gguf_writer.add_token_list(conv_fixture.byte_symbols() + [space * 2])
        self.gguf_writer.add_token_types([1] * 257)
        self.gguf_writer.add_token_merges([f"{space} {space}"])
        self.gguf_writer.add_bos_token_id(1)
        self.gguf_writer.add_eos_token_id(2)
        self.gguf_writer.add_add_bos_token(False)

    get_model_class(config.architectures[0] if config.architectures else type(model).__name__).set_vocab = bench_vocab
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp) / args.arch
        model.save_pretrained(d)
        if args.arch == "granite_hybrid":
            # llama.cpp's converter reads the published spelling of the layer
            # kinds ("mamba" / "attention"); transformers 5 saves its own.
            cfg = json.loads((d / "config.json").read_text())
            cfg["layer_types"] = [{"linear_attention": "mamba", "full_attention": "attention"}.get(t, t)
                                  for t in cfg["layer_types"]]
            (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        vocab = {sym: i for i, sym in enumerate(conv_fixture.byte_symbols() + ["\u0120\u0120"])}
        (d / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": []},
                                                      "added_tokens": []}))
        sys.argv = ["convert_hf_to_gguf.py", str(d), "--outtype", "f16", "--outfile", str(f16)]
        if args.arch == "qwen35":
            sys.argv.append("--no-mtp")  # a checkpoint without multi-token-prediction layers
        conv.main()
    print(f"wrote {f16} ({f16.stat().st_size >> 20} MiB)")
    if args.llama_quantize:
        types = ["MXFP4_MOE"] if args.arch == "gpt_oss" else ["Q8_0", "Q4_K_M"] if args.arch in ("lfm2", "qwen35", "granite_hybrid") else []
        for t in types:
            q = out.with_name(out.name + "-" + t.lower().replace("_moe", "") + ".gguf")
            subprocess.run([args.llama_quantize, str(f16), str(q), t], check=True)
            print(f"wrote {q} ({q.stat().st_size >> 20} MiB)")


if __name__ == "__main__":
    main()
