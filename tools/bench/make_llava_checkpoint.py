#!/usr/bin/env python3
"""Writes a LLaVA-1.5-shaped checkpoint for the image benchmark
(tools/bench/vision_vs_llama_cpp.py): random weights (no model hub here) in
the shape of a CLIP ViT-L/14-336 vision tower (24 layers of 1024, features of
the second-to-last layer, the CLS row dropped: 576 image tokens), LLaVA's
two-layer GELU projector and a Llama text model in TinyLlama-1.1B's shape, in
float16, with the Llama 2 family's tokenizer.json from ../shared/tokenizers/llama2
plus <image> and <pad> at LLaVA-1.5's ids (the vocabulary padded to 32,064), a
USER/ASSISTANT chat template and CLIP's image processor, saved by transformers
as OUT/ (what `troupe serve --model OUT` reads). From the same weights it
writes llama.cpp's two files: OUT.text.<type>.gguf (the text model, by
llama.cpp's convert_hf_to_gguf.py) and OUT.mmproj.f16.gguf (the vision tower
and projector, by llama.cpp's legacy convert_image_encoder_to_gguf.py, since
its new converter writes LlavaForConditionalGeneration's mmproj for Pixtral
only).

    /work/refenv/bin/python tools/bench/make_llava_checkpoint.py \\
        --llama-cpp /path/to/llama.cpp --out ~/.cache/troupe/bench/llava-1.5-shaped
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer
from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                          LlavaForConditionalGeneration, LlavaProcessor, PreTrainedTokenizerFast)

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 32064  # 32,000 pieces, <image>, <pad> and unused rows: LLaVA-1.5's padded table
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
# USER/ASSISTANT turns as LLaVA-1.5 prompts them ("USER: <image>\n... ASSISTANT:").
# Content is a string or a list of parts: an image part is <image> and a
# newline; any other part with a text is that text (llama-server hands its
# image placeholders to the template as such parts).
TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] != 'system' %}{{ m['role'] | upper }}: {% endif %}"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}"
    "{% if p['type'] == 'image' %}<image>\n{% elif p['text'] is defined %}{{ p['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% if m['role'] == 'assistant' %}</s>{% else %} {% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}")


def tokenizer(shared):
    """The Llama 2 family's tokenizer.json (read where it lies, never
    copied) with <image> (id 32000) and <pad> (32001) as LLaVA-1.5 adds them,
    and unused special tokens up to the padded vocabulary: llama.cpp's
    converter, reading a tokenizer.json, writes one GGUF token per tokenizer
    entry and no padding, so the table must have as many rows as the model."""
    tok = Tokenizer.from_file(str(shared / "tokenizers" / "llama2" / "tokenizer.json"))
    extra = ["<image>", "<pad>"] + [f"<unused{i}>" for i in range(VOCAB - tok.get_vocab_size() - 2)]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in extra])
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", extra_special_tokens={"image_token": "<image>"})


def llava_15(image_token):
    """A random LlavaForConditionalGeneration in LLaVA-1.5's vision shape with
    TinyLlama-1.1B's text shape, in float16."""
    vision = CLIPVisionConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                              image_size=336, patch_size=14, hidden_act="quick_gelu", projection_dim=768,
                              layer_norm_eps=1e-5)
    text = LlamaConfig(vocab_size=VOCAB, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                       num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=4096,
                       rope_theta=10000.0, rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=False,
                       bos_token_id=1, eos_token_id=2, pad_token_id=32001)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token, vision_feature_layer=-2,
                      vision_feature_select_strategy="default", projector_hidden_act="gelu", image_seq_length=576)
    torch.manual_seed(0)
    return LlavaForConditionalGeneration._from_config(cfg, dtype=torch.float16).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--outtype", default="f16", help="the text GGUF's type (llama.cpp converter's --outtype)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    args = ap.parse_args()
    out = args.out.expanduser()

    tok = tokenizer(args.shared)
    image_token = tok.convert_tokens_to_ids("<image>")
    assert image_token == 32000, image_token
    model = llava_15(image_token)
    image_processor = CLIPImageProcessor(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336},
                                         image_mean=CLIP_MEAN, image_std=CLIP_STD, do_convert_rgb=True)
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok, chat_template=TEMPLATE, patch_size=14,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    check_prompt(processor)

    text_gguf = out.with_name(f"{out.name}.text.{args.outtype}.gguf")
    mmproj_gguf = out.with_name(f"{out.name}.mmproj.f16.gguf")
    convert_text(args.llama_cpp, out, text_gguf, args.outtype)
    convert_mmproj(args.llama_cpp, model, mmproj_gguf)
    print(f"Troupe:    {out}/\nllama.cpp: {text_gguf}\n           {mmproj_gguf}")


def check_prompt(processor):
    """The processor expands one image into 576 <image> ids, as LLaVA-1.5's does."""
    text = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {
        "type": "text", "text": "What is in this picture?"}]}], add_generation_prompt=True, tokenize=False)
    from PIL import Image
    ids = processor(text=text, images=[Image.new("RGB", (640, 480))], return_tensors="pt")["input_ids"][0]
    n = int((ids == processor.tokenizer.convert_tokens_to_ids("<image>")).sum())
    assert n == 576, n
    print(f"prompt {text!r}: {len(ids)} ids, {n} of them image tokens")


def llama_cpp_env(llama_cpp):
    return {"PYTHONPATH": str(llama_cpp / "gguf-py"), "PATH": "/usr/bin:/bin"}


def convert_text(llama_cpp, out, gguf, outtype):
    """llama.cpp's own converter: the text model of the LLaVA directory
    (it leaves the vision tower and projector out)."""
    subprocess.run([sys.executable, str(llama_cpp / "convert_hf_to_gguf.py"), str(out), "--outtype", outtype,
                    "--outfile", str(gguf)], check=True, env=llama_cpp_env(llama_cpp))


# The legacy converter was written for transformers 4, whose CLIPVisionModel
# holds the tower under .vision_model (tensors vision_model.*, which it renames
# v.*); transformers 5's holds it at the top. This runs the converter unchanged
# with CLIPVisionModel standing for a module in the old layout around the new one.
LEGACY_SHIM = """
import runpy, sys, torch
from transformers.models.clip import modeling_clip  # where `from transformers import` finds it
Tower = modeling_clip.CLIPVisionModel
class CLIPVisionModel(torch.nn.Module):
    def __init__(self, tower):
        super().__init__()
        self.vision_model = tower
    @classmethod
    def from_pretrained(cls, path):
        return cls(Tower.from_pretrained(path, dtype=torch.float32))
modeling_clip.CLIPVisionModel = CLIPVisionModel
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert_mmproj(llama_cpp, model, gguf, use_f32=False):
    """llama.cpp's legacy LLaVA route: a CLIP vision model directory and a
    projector file of mm.0 / mm.2 tensors (the projector's linear_1 and
    linear_2), from the same weights. Without vision_feature_layer in the
    vision config, the script keeps all but the last encoder layer: the
    second-to-last layer's output, as vision_feature_layer -2 asks. With
    use_f32 the tower's matrices stay f32 (the script still writes the patch
    convolution and the projector's matrices in f16)."""
    script = llama_cpp / "tools" / "mtmd" / "legacy-models" / "convert_image_encoder_to_gguf.py"
    proj = model.model.multi_modal_projector
    with tempfile.TemporaryDirectory() as tmp:
        vision = Path(tmp) / "vision"
        model.model.vision_tower.save_pretrained(vision)
        tensors = {"mm.0.weight": proj.linear_1.weight, "mm.0.bias": proj.linear_1.bias,
                   "mm.2.weight": proj.linear_2.weight, "mm.2.bias": proj.linear_2.bias}
        torch.save({k: v.detach().clone().contiguous() for k, v in tensors.items()}, Path(tmp) / "llava.projector")
        subprocess.run([sys.executable, "-c", LEGACY_SHIM, str(script), "-m", str(vision), "--clip-model-is-vision",
                        "--llava-projector", str(Path(tmp) / "llava.projector"), "--projector-type", "mlp",
                        "--image-mean", *map(str, CLIP_MEAN), "--image-std", *map(str, CLIP_STD),
                        "-o", str(Path(tmp) / "gguf"), *(["--use-f32"] if use_f32 else [])], check=True,
                       env=llama_cpp_env(llama_cpp), stdout=subprocess.DEVNULL)
        shutil.move(Path(tmp) / "gguf" / f"mmproj-model-{'f32' if use_f32 else 'f16'}.gguf", gguf)


if __name__ == "__main__":
    main()
