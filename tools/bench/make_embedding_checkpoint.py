#!/usr/bin/env python3
"""Writes a Qwen3-Embedding-0.6B-shaped embedding model for the embedding
benchmarks (tools/bench/embeddings_vs_llama_cpp.py): random weights (no
model hub here) in the release's shape (28 layers, 1024 wide, 16 heads of
128, 8 KV heads, FFN 3072, Qwen3's 151,669-token vocabulary, tied), the real
Qwen3 tokenizer from ../shared/tokenizers/qwen3 with Qwen3-Embedding's
post-processor (<|endoftext|> appended), saved by sentence-transformers
(last-token pooling, Normalize) as OUT/, and converted by llama.cpp's own
converter into OUT.<type>.gguf (its pooling_type read from modules.json).

    /work/refenv/bin/python tools/bench/make_embedding_checkpoint.py \\
        --llama-cpp /path/to/llama.cpp --out ~/.cache/troupe/bench/qwen3-embedding-0.6b --outtype q8_0
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer, models
from tokenizers import Tokenizer, processors
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

ROOT = Path(__file__).resolve().parents[2]


def qwen3_06b(eos):
    """A random Qwen3ForCausalLM in the 0.6B release's shape (the base of
    Qwen3-Embedding-0.6B and Qwen3-Reranker-0.6B), in bf16."""
    cfg = Qwen3Config(vocab_size=151669, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                      num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=32768,
                      rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=None,
                      eos_token_id=eos, pad_token_id=eos, dtype="bfloat16")
    torch.manual_seed(0)
    with torch.device("cpu"):
        return Qwen3ForCausalLM(cfg).to(torch.bfloat16).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--outtype", default="q8_0", help="the GGUF's type (llama.cpp converter's --outtype)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    args = ap.parse_args()

    tok = Tokenizer.from_file(str(args.shared / "tokenizers" / "qwen3" / "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>", pair="$A <|endoftext|> $B <|endoftext|>", special_tokens=[("<|endoftext|>", eos)])
    model = qwen3_06b(eos)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                pad_token="<|endoftext|>").save_pretrained(tmp)
        word = models.Transformer(tmp, model_args={"dtype": torch.bfloat16})
        pool = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="lasttoken")
        st = SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu")
        shutil.rmtree(args.out, ignore_errors=True)
        st.save(str(args.out))
    convert(args.llama_cpp, args.out, args.outtype)


def convert(llama_cpp, out, outtype):
    """llama.cpp's own converter on the directory `out`, into OUT.<type>.gguf."""
    gguf = out.with_name(out.name + f".{outtype}.gguf")
    subprocess.run([sys.executable, str(llama_cpp / "convert_hf_to_gguf.py"), str(out), "--outtype", outtype,
                    "--outfile", str(gguf)], check=True,
                   env={"PYTHONPATH": str(llama_cpp / "gguf-py"), "PATH": "/usr/bin:/bin"})
    print(f"{out}/ and {gguf}")


if __name__ == "__main__":
    main()
