#!/usr/bin/env python3
"""Writes a Gemma-3-4B-shaped vision-language checkpoint for the image
benchmark (tools/bench/vision_vs_llama_cpp.py): random weights (no model hub
here) in the shape of Gemma 3 4B's SigLIP tower (896-pixel images in 14-pixel
patches, 27 layers of 1152; 4096 patches pooled to 256 image tokens), its
projector and its text model (34 layers of 2560, 8 query and 4 key-value
heads of 256, every sixth layer global, the others local over 1024
positions), in bfloat16 as Google publishes it. The vocabulary is the Llama 3
family's tokenizer.json from ../shared/tokenizers/llama3 (a tokenizer
llama.cpp's converter knows) plus Gemma's turn and image tokens, so the
embedding table has 128,264 rows where Gemma 3's has 262,208: the image
work, which this benchmark measures, is Gemma 3 4B's. Saved by transformers
as OUT/ (what `troupe serve --model OUT` reads); from the same weights
llama.cpp's own converter writes OUT.text.<type>.gguf and, with --mmproj,
OUT.mmproj.f16.gguf.

    /work/refenv/bin/python tools/bench/make_gemma3_checkpoint.py \\
        --llama-cpp /path/to/llama.cpp --out ~/.cache/troupe/bench/gemma-3-4b-shaped
"""
import argparse
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer
from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor, Gemma3TextConfig,
                          PreTrainedTokenizerFast, SiglipVisionConfig)
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

from make_llava_checkpoint import convert_text, llama_cpp_env

ROOT = Path(__file__).resolve().parents[2]
SPECIALS = ["<pad>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<image_soft_token>"]
# Gemma 3's turns; an image part is <start_of_image>, a text part its text
# (llama-server hands its image placeholders to the template as text parts).
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>"
            "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
            "{% if m['content'] is string %}{{ m['content'] | trim }}{% else %}"
            "{% for p in m['content'] %}{% if p['type'] == 'image' %}<start_of_image>"
            "{% elif p['text'] is defined %}{{ p['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
            "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def tokenizer(shared):
    """Llama 3's tokenizer.json (read where it lies, never copied) with
    Gemma's turn and image tokens after it."""
    tok = Tokenizer.from_file(str(shared / "tokenizers" / "llama3" / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<end_of_turn>",
                                   pad_token="<pad>",
                                   extra_special_tokens={"image_token": "<image_soft_token>",
                                                         "boi_token": "<start_of_image>",
                                                         "eoi_token": "<end_of_image>"})


def gemma3_4b(tok):
    """A random Gemma3ForConditionalGeneration in Gemma 3 4B's shape, in bfloat16."""
    ids = tok.convert_tokens_to_ids
    vision = SiglipVisionConfig(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                                num_attention_heads=16, image_size=896, patch_size=14, layer_norm_eps=1e-6,
                                vision_use_head=False)
    text = Gemma3TextConfig(vocab_size=len(tok), hidden_size=2560, intermediate_size=10240, num_hidden_layers=34,
                            num_attention_heads=8, num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256,
                            sliding_window=1024, max_position_embeddings=131072, rope_theta=1_000_000.0,
                            rope_local_base_freq=10_000.0, rope_scaling={"rope_type": "linear", "factor": 8.0},
                            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                            pad_token_id=tok.pad_token_id)
    cfg = Gemma3Config(vision_config=vision, text_config=text, mm_tokens_per_image=256,
                       boi_token_index=ids("<start_of_image>"), eoi_token_index=ids("<end_of_image>"),
                       image_token_index=ids("<image_soft_token>"))
    torch.manual_seed(0)
    return Gemma3ForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16).eval()


def published_names(path):
    """Renames transformers 5's vision_tower.* tensors to the published
    checkpoints' vision_tower.vision_model.* (what llama.cpp's converter
    maps; Troupe reads either) by rewriting the safetensors header and
    copying the data after it."""
    tmp = path.with_suffix(".tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        n = struct.unpack("<Q", src.read(8))[0]
        header = json.loads(src.read(n))
        renamed = {("vision_tower.vision_model." + k[len("vision_tower."):]
                    if k.startswith("vision_tower.") and not k.startswith("vision_tower.vision_model.") else k): v
                   for k, v in header.items()}
        text = json.dumps(renamed, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        dst.write(struct.pack("<Q", len(text)) + text)
        shutil.copyfileobj(src, dst, 1 << 24)
    tmp.replace(path)


def check_prompt(processor):
    """The processor frames one image as 256 image tokens, as Gemma 3's does."""
    from PIL import Image
    text = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {
        "type": "text", "text": "What is in this picture?"}]}], add_generation_prompt=True, tokenize=False)
    ids = processor(text=text, images=[Image.new("RGB", (640, 480))], return_tensors="pt")["input_ids"][0]
    n = int((ids == processor.tokenizer.convert_tokens_to_ids("<image_soft_token>")).sum())
    assert n == 256, n
    print(f"prompt {text!r}: {len(ids)} ids, {n} of them image tokens")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--outtype", default="bf16", help="the text GGUF's type (llama.cpp converter's --outtype)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--force", action="store_true", help="convert the text GGUF again when it exists")
    args = ap.parse_args()
    out = args.out.expanduser()

    tok = tokenizer(args.shared)
    model = gemma3_4b(tok)
    image_processor = Gemma3ImageProcessorPil(size={"height": 896, "width": 896})
    processor = Gemma3Processor(image_processor=image_processor, tokenizer=tok, chat_template=TEMPLATE,
                                image_seq_length=256)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    del model
    published_names(out / "model.safetensors")
    check_prompt(processor)

    text_gguf = out.with_name(f"{out.name}.text.{args.outtype}.gguf")
    mmproj_gguf = out.with_name(f"{out.name}.mmproj.f16.gguf")
    if not text_gguf.exists() or args.force:
        convert_text(args.llama_cpp, out, text_gguf, args.outtype)
    subprocess.run([sys.executable, str(args.llama_cpp / "convert_hf_to_gguf.py"), str(out), "--mmproj",
                    "--outtype", "f16", "--outfile", str(mmproj_gguf)], check=True, env=llama_cpp_env(args.llama_cpp))
    print(f"Troupe:    {out}/\nllama.cpp: {text_gguf}\n           {mmproj_gguf}")


if __name__ == "__main__":
    main()
