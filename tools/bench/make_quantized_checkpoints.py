"""Writes one random Qwen3-shaped model as the quantized releases store it,
for bench_generate and llama-bench: <out>-bf16 (plain), <out>-gptq
(symmetric groups of 128: Troupe reads q4_0), <out>-awq (zero points,
groups of 128: q4_1), <out>-w8a8 (int8 rows: q8_0) and <out>-fp8 (128x128
blocks: bf16 at load), plus <out>-gptq-q4_0.gguf, <out>-bf16-q4_1.gguf and
<out>-bf16-q8_0.gguf for llama.cpp: its converter
dequantizes the GPTQ directory to f16 (AWQ it does not read: the bf16 one
stands in) and llama-quantize makes the GGUF type Troupe reads each as, the
files a llama.cpp user would make.

    python3 tools/bench/make_quantized_checkpoints.py --llama-cpp <tree> \
        --gptqmodel <unpacked gptqmodel sdist> --out ~/.cache/troupe/bench/qwen3-q

The weights are random (std 0.02); only the speed of the shapes matters.
"""

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import Qwen3Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import make_hf_quantized_models as quant  # noqa: E402

GROUP = 128


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--llama-cpp", type=Path, help="a llama.cpp tree: its converter and build/bin/llama-quantize")
    ap.add_argument("--gptqmodel", required=True, type=Path)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location(
        "awq_packing", args.gptqmodel / "gptqmodel/quantization/awq/utils/packing_utils.py")
    awq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(awq)

    config = Qwen3Config(vocab_size=32000, hidden_size=args.hidden, intermediate_size=args.ffn,
                         num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                         num_key_value_heads=args.hidden // 128, head_dim=64, max_position_embeddings=4096,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    g = torch.Generator().manual_seed(1)
    shapes = {"self_attn.q_proj": (args.hidden, args.hidden), "self_attn.k_proj": (args.hidden // 2, args.hidden),
              "self_attn.v_proj": (args.hidden // 2, args.hidden), "self_attn.o_proj": (args.hidden, args.hidden),
              "mlp.gate_proj": (args.ffn, args.hidden), "mlp.up_proj": (args.ffn, args.hidden),
              "mlp.down_proj": (args.hidden, args.ffn)}
    plain = {"model.embed_tokens.weight": torch.randn(32000, args.hidden, generator=g) * 0.02,
             "model.norm.weight": torch.ones(args.hidden)}
    for il in range(args.layers):
        p = f"model.layers.{il}."
        for n in ("input_layernorm", "post_attention_layernorm"):
            plain[p + n + ".weight"] = torch.ones(args.hidden)
        for n in ("q_norm", "k_norm"):
            plain[p + "self_attn." + n + ".weight"] = torch.ones(64)
        for n, shape in shapes.items():
            plain[p + n + ".weight"] = torch.randn(*shape, generator=g) * 0.02
    forms = {
        "bf16": (None, lambda w: ({"weight": w.bfloat16()}, None)),
        "gptq": ({"quant_method": "gptq", "bits": 4, "group_size": GROUP, "sym": True, "desc_act": False,
                  "checkpoint_format": "gptq"}, lambda w: quant.quantize_gptq(w, GROUP, True, False, g)),
        "awq": ({"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm"},
                lambda w: quant.quantize_awq(w, GROUP, awq)),
        "w8a8": (quant.quantization_config("int8", None), lambda w: quant.quantize_int8(w, None)),
        "fp8": ({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                 "weight_block_size": [128, 128]},
                lambda w: (dict(zip(("weight", "weight_scale_inv"),
                                    quant.quantize(w, "fp8", [128, 128], torch.float32)[:2])), None)),
    }
    for form, (qcfg, fn) in forms.items():
        d = Path(f"{args.out}-{form}")
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        tensors = {}
        for name, w in plain.items():
            if w.dim() == 2 and name.startswith("model.layers."):
                base = name[: -len("weight")]
                for suffix, t in fn(w)[0].items():
                    tensors[base + suffix] = t.contiguous()
            else:
                tensors[name] = w.bfloat16().contiguous()
        save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
        cfg = config.to_dict()
        cfg["architectures"] = ["Qwen3ForCausalLM"]
        cfg["dtype"] = "bfloat16"
        if qcfg is not None:
            cfg["quantization_config"] = qcfg
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        print(f"{d}: {sum(f.stat().st_size for f in d.iterdir()) / 1e6:.0f} MB")
    if args.llama_cpp is None:
        return
    # llama.cpp's way to these models: its converter (which dequantizes
    # GPTQ; AWQ it does not read, so the AWQ model goes through the bf16
    # one's values) to f16, then llama-quantize to the type Troupe reads.
    sys.path[:0] = [str(args.llama_cpp), str(args.llama_cpp / "gguf-py")]
    for k in [k for k in sys.modules if k == "gguf" or k.startswith("gguf.")]:
        del sys.modules[k]
    import make_gguf_arch_fixtures as gguf_fx
    import convert_hf_to_gguf as conv
    from conversion import get_model_class
    def vocab(self):  # the byte symbols, then placeholders up to the model's 32000 rows
        tokens = gguf_fx.byte_symbols() + [f"<x{i}>" for i in range(256, 32000)]
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre("qwen2")
        self.gguf_writer.add_token_list(tokens)
        self.gguf_writer.add_token_types([1] * len(tokens))
        self.gguf_writer.add_token_merges(["! !"])  # llama.cpp refuses a BPE vocabulary without merges
        self.gguf_writer.add_bos_token_id(1)
        self.gguf_writer.add_eos_token_id(2)
    get_model_class("Qwen3ForCausalLM").set_vocab = vocab
    for form, qtype in (("gptq", "Q4_0"), ("bf16", "Q4_1"), ("bf16", "Q8_0")):
        d = Path(f"{args.out}-{form}")
        f16 = Path(f"{args.out}-{form}-f16.gguf")
        sys.argv = ["convert_hf_to_gguf.py", str(d), "--outtype", "f16", "--outfile", str(f16)]
        conv.main()
        out = Path(f"{args.out}-{form}-{qtype.lower()}.gguf")
        subprocess.run([str(args.llama_cpp / "build/bin/llama-quantize"), str(f16), str(out), qtype], check=True)
        f16.unlink()
        print(f"{out}: {out.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
