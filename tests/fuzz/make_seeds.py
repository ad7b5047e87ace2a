#!/usr/bin/env python3
"""Writes the seed corpora in tests/fuzz/corpus/ (committed; rerun only to
change them). Each seed is a small, valid file of its kind, so the fuzzers
start from inputs that get past the first checks:

  gguf_model         tiny Llama GGUFs written by troupe-make-model
  safetensors_model  config.json + NUL + model.safetensors, the test
                     fixtures' Llama/Qwen2/GPT-2 shrunk to 1 layer, width 8,
                     and the FP8, GPTQ, AWQ and 4-bit compressed-tensors
                     ones cut to 1 layer
  tokenizer_json     tokenizer.json (byte-level BPE; SentencePiece-style BPE
                     with byte fallback; WordPiece; SentencePiece unigram)
                     + NUL + a text to encode
  jinja_template     the interpreter cases of tests/fixtures/chat_templates.json
                     and a ChatML, a Llama 3 and a tool-calling template
  config_readers     the topologies and workloads in configs/, the vision fixtures' image processors
  mmproj             the mmproj files of tests/fixtures/gguf_vision (llama.cpp's converters wrote them)
  json_schema        the schemas of tests/fixtures/json_schema_cases.json, each with a document
  gbnf               the grammars of tests/fixtures/gbnf_cases.json, each with a string
  tool_calls         a syntax byte (4: harmony), a cut byte, then an output with calls in that syntax
  request_parser, ws_message: hand-written request bodies (already there)

  make_seeds.py --source-dir=. --make-model=build/release/troupe-make-model
"""
import argparse
import json
import re
import pathlib
import shutil
import struct
import subprocess
import tempfile

import numpy as np


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def mmproj_seeds(src, out):
    for path in sorted((src / "tests" / "fixtures" / "gguf_vision").glob("*/mmproj.gguf")):
        write(out / "mmproj" / f"{path.parent.name}.gguf", path.read_bytes())


def gguf_seeds(out, make_model):
    shapes = [
        ("llama_q8_0_tied", ["--dtype", "q8_0", "--dim", "32", "--ffn", "32", "--heads", "2", "--kv-heads", "1", "--tie-embeddings"]),
        ("llama_f16", ["--dtype", "f16", "--dim", "8", "--ffn", "8", "--heads", "2", "--no-tie-embeddings"]),
        ("llama_q4_1", ["--dtype", "q4_1", "--dim", "32", "--ffn", "32", "--heads", "4"]),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in shapes:
            path = pathlib.Path(tmp) / f"{name}.gguf"
            subprocess.run([make_model, "--layers", "1", "--vocab", "259", "--ctx", "64", "--seed", "1",
                            "--threads", "1", *flags, "--out", str(path)], check=True, capture_output=True)
            write(out / "gguf_model" / f"{name}.gguf", path.read_bytes())


def safetensors_bytes(tensors, dtype):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape in tensors:
        n = int(np.prod(shape))
        data = (np.arange(n, dtype=np.float32) % 7 / 50.0 - 0.06).astype(np.float16 if dtype == "F16" else np.float32)
        raw = data.tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def safetensors_seeds(src, out):
    # Every size of the fixtures divided by 8, one layer: the same tensor
    # names and layouts, about 4 KB each.
    for arch, dtype in (("llama", "F32"), ("qwen2", "F32"), ("gpt2", "F32"), ("llama", "F16"),
                        ("mistral", "F32"), ("mixtral", "F32"), ("qwen3", "F32")):
        # The later architectures keep the sizes that are not a multiple of
        # 8 (expert counts, a head_dim of 24 / 8 = 3 stays consistent).
        keep_odd = arch in ("mistral", "mixtral", "qwen3")
        # Qwen3's head_dim of 24 must stay even for RoPE: a quarter.
        div = 4 if arch == "qwen3" else 8
        d = src / "tests/fixtures/hf" / arch
        cfg = json.loads((d / "config.json").read_text())
        for key in ("hidden_size", "intermediate_size", "head_dim", "max_position_embeddings", "vocab_size",
                    "n_embd", "n_inner", "n_positions"):
            if key in cfg and cfg[key] and not (keep_odd and (cfg[key] % div != 0 or cfg[key] < div)):
                cfg[key] //= div
        for key in ("num_hidden_layers", "n_layer"):
            if key in cfg:
                cfg[key] = 1
        if "rope_scaling" in cfg and cfg["rope_scaling"]:
            cfg["rope_scaling"]["original_max_position_embeddings"] //= div
        if "layer_types" in cfg:
            cfg["layer_types"] = cfg["layer_types"][:1]
        # One file, or the shards of a sharded checkpoint merged into one.
        header = {}
        for shard in sorted(d.glob("model*.safetensors")):
            raw = shard.read_bytes()
            n = struct.unpack("<Q", raw[:8])[0]
            header.update(json.loads(raw[8:8 + n]))
        def shrink(n):
            return n if keep_odd and (n % div != 0 or n < div) else n // div
        tensors = [(name, [shrink(s) for s in t["shape"]]) for name, t in sorted(header.items())
                   if name != "__metadata__" and not re.search(r"\.(layers|h)\.1\.", name)]
        blob = json.dumps(cfg, indent=1).encode() + b"\0" + safetensors_bytes(tensors, dtype)
        write(out / "safetensors_model" / f"{arch}_{dtype.lower()}.bin", blob)


def quantized_seeds(src, out):
    # The pre-quantized fixtures (FP8, GPTQ, AWQ, compressed-tensors 4-bit)
    # cut to their first layer, every tensor's bytes as the fixture has them:
    # their scales, packed words and quantization_config are what the
    # fuzzer mutates.
    for name in ("qwen3_fp8", "qwen3_gptq", "qwen3_awq", "qwen3_w4a16"):
        d = src / "tests/fixtures/hf" / name
        cfg = json.loads((d / "config.json").read_text())
        cfg["num_hidden_layers"] = 1
        cfg["layer_types"] = cfg["layer_types"][:1]
        raw = (d / "model.safetensors").read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
        kept, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
        for tensor, t in sorted(header.items()):
            if tensor == "__metadata__" or ".layers.1." in tensor:
                continue
            begin, end = t["data_offsets"]
            kept[tensor] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [offset, offset + end - begin]}
            blobs.append(data[begin:end])
            offset += end - begin
        text = json.dumps(kept, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        blob = json.dumps(cfg, indent=1).encode() + b"\0" + struct.pack("<Q", len(text)) + text + b"".join(blobs)
        write(out / "safetensors_model" / f"{name}.bin", blob)


def byte_level_chars():
    """GPT-2's printable stand-ins for the 256 bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def tokenizer_seeds(out):
    text = "\0Hello world, it's 2024!  Caf\u00e9 \U0001F600 <|endoftext|> \n\tdone <s>"
    chars = byte_level_chars()
    vocab = {c: i for i, c in enumerate(chars)}
    merges = [["\u0120", "w"], ["h", "e"], ["l", "l"], ["he", "ll"], ["\u0120w", "o"], ["o", "r"]]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    gpt2 = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": len(vocab), "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    write(out / "tokenizer_json" / "byte_level_bpe.bin", json.dumps(gpt2, ensure_ascii=False) + text)

    spm_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        spm_vocab[f"<0x{b:02X}>"] = len(spm_vocab)
    for piece in ["\u2581", "H", "e", "l", "o", "w", "r", "d", "\u2581w", "ll", "He", "Hell", "Hello", "\u2581Hello"]:
        spm_vocab.setdefault(piece, len(spm_vocab))
    spm = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "},
                                                        "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": spm_vocab,
                  "merges": ["\u2581 w", "l l", "H e", "He ll", "Hell o", "\u2581 Hello"]},
    }
    write(out / "tokenizer_json" / "sentencepiece_bpe.bin", json.dumps(spm, ensure_ascii=False) + text)

    split = dict(gpt2)
    split["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"},
         "behavior": "Isolated", "invert": False},
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    split["normalizer"] = {"type": "NFC"}
    write(out / "tokenizer_json" / "split_digits_nfc.bin", json.dumps(split, ensure_ascii=False) + text)


CHATML = """{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}\
{{ '<|im_start|>system\\nYou are a helpful AI assistant<|im_end|>\\n' }}{% endif %}\
{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"""

LLAMA3 = """{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}\
{%- set messages = messages[1:] %}{%- else %}{%- set system_message = "" %}{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" + system_message + "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"""

TOOLS = """{%- macro render(m) -%}{{ m.role | upper }}: {{ m.content if m.content is string else '' }}{%- endmacro -%}
{%- set ns = namespace(calls=0) -%}
{%- if tools %}Tools: {{ tools | tojson(indent=2) }}{{ '\\n' }}{%- endif -%}
{%- for m in messages if m.role != 'system' -%}
  {%- if m.tool_calls is defined and m.tool_calls -%}
    {%- for c in m.tool_calls -%}{%- set ns.calls = ns.calls + 1 -%}
<call n="{{ ns.calls }}">{{ c.function.name }}({{ c.function.arguments | tojson }})</call>
    {%- endfor -%}
  {%- else -%}{{ render(m) }}{{ '\\n' if not loop.last }}{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}{{ 'ASSISTANT: ' ~ (eos_token | default('', true)) | length }}{% endif -%}
{{ raise_exception('no') if messages | length > 100 }}{{ "%s" | replace("s", "d") }}{{ [1, 2, 3][::-1] | join(",") }}"""


def wordpiece_seed(src, out):
    """BERT's tokenizer.json (WordPiece, BertNormalizer, BertPreTokenizer,
    TemplateProcessing), from the embedding fixture, and text with accents,
    CJK, controls and a long word."""
    tok = (src / "tests/fixtures/hf/bert_embedding_cls/tokenizer.json").read_text()
    text = "\0Caf\u00e9 \u4e2d\u6587, the QUICK fox\u0007\t##s " + "x" * 120
    write(out / "tokenizer_json" / "wordpiece_bert.bin", json.dumps(json.loads(tok), ensure_ascii=False) + text)


def unigram_seed(src, out):
    """A SentencePiece-unigram tokenizer.json (Unigram with byte_fallback,
    Precompiled + regex Replace normalizers, Metaspace, ByteFallback/Fuse/
    Strip decoder) from tests/fixtures/hf_unigram.json, its vocab cut to 320
    pieces and its charsmap to the fixture's dozen-rule one, and text with
    what the rules rewrite, unknown characters and runs of spaces."""
    fixture = json.loads((src / "tests/fixtures/hf_unigram.json").read_text())
    variant = next(t for t in fixture["tokenizers"] if t["name"] == "byte_fallback")
    tok = variant["tokenizer_json"]
    tok["model"]["vocab"] = fixture["vocabs"][tok["model"]["vocab"]][:320]
    for n in tok["normalizer"]["normalizers"]:
        if n["type"] == "Precompiled":
            n["precompiled_charsmap"] = fixture["small_charsmap"]
    text = "\0ABC \uff21\u200b  caf\u00e9 e\u0301 \ufb01x \u2603\u2603 \t\r\n " + "ab" * 40
    write(out / "tokenizer_json" / "unigram_byte_fallback.bin", json.dumps(tok, ensure_ascii=False) + text)


def jinja_seeds(src, out):
    fixtures = json.loads((src / "tests/fixtures/chat_templates.json").read_text())
    for case in fixtures["interpreter_cases"]:
        if len(case["source"]) <= 4096:
            write(out / "jinja_template" / f"{case['name']}.jinja", case["source"])
    for name, text in (("chatml", CHATML), ("llama3", LLAMA3), ("tools", TOOLS)):
        write(out / "jinja_template" / f"{name}.jinja", text)


def config_seeds(src, out):
    for path in sorted((src / "configs").glob("*.json")) + sorted((src / "configs/workloads").glob("*.json")):
        shutil.copy(path, out / "config_readers" / path.name)
    # transformers 5 saves the image processor under "image_processor" in processor_config.json.
    for name in ("llava_clip", "llava_siglip", "gemma3_vision"):
        processor = json.loads((src / "tests/fixtures/hf" / name / "processor_config.json").read_text())
        write(out / "config_readers" / f"image_processor_{name}.json",
              json.dumps(processor["image_processor"], indent=1) + "\n")


def schema_seeds(src, out):
    # Each fixture schema with one of its documents after the separator.
    cases = json.loads((src / "tests/fixtures/json_schema_cases.json").read_text())["cases"]
    for case in cases:
        for i, doc in enumerate(case["documents"][:3]):
            write(out / "json_schema" / f"{case['name']}_{i}.txt", json.dumps(case["schema"]) + "\n---\n" + doc["text"])


def gbnf_seeds(src, out):
    cases = json.loads((src / "tests/fixtures/gbnf_cases.json").read_text())["cases"]
    for case in cases:
        for i, doc in enumerate(case["documents"][:3]):
            write(out / "gbnf" / f"{case['name']}_{i}.txt", case["gbnf"] + "\n---\n" + doc["text"])


def tool_call_seeds(out):
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    outputs = [
        (1, "Let me check.\n<tool_call>\n" + call + "\n</tool_call>"),
        (1, "<tool_call>\n" + call + "\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": \"{}\"}\n</tool_call>"),
        (2, '<|python_tag|>{"name": "f", "parameters": {"a": [1, "}"]}}; {"name": "get_weather", "parameters": {}}'),
        (3, "[TOOL_CALLS][" + call + "]"),
        (0, "[" + call + ', {"name": "f"}]'),
        (0, "Plain text with a { brace."),
        (4, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant to=functions.get_weather"
            "<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}"),
        (4, "<|channel|>analysis<|message|>Hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello<|return|>"),
    ]
    for i, (syntax, text) in enumerate(outputs):
        write(out / "tool_calls" / f"output_{i}.txt", bytes([syntax, 7]).decode("latin-1") + text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", default=".")
    ap.add_argument("--make-model", default="build/release/troupe-make-model")
    args = ap.parse_args()
    src = pathlib.Path(args.source_dir).resolve()
    out = src / "tests/fuzz/corpus"
    for name in ("gguf_model", "safetensors_model", "tokenizer_json", "jinja_template", "config_readers", "json_schema",
                 "gbnf", "tool_calls"):
        shutil.rmtree(out / name, ignore_errors=True)
        (out / name).mkdir(parents=True)
    gguf_seeds(out, args.make_model)
    safetensors_seeds(src, out)
    quantized_seeds(src, out)
    tokenizer_seeds(out)
    wordpiece_seed(src, out)
    unigram_seed(src, out)
    jinja_seeds(src, out)
    config_seeds(src, out)
    mmproj_seeds(src, out)
    schema_seeds(src, out)
    gbnf_seeds(src, out)
    tool_call_seeds(out)


if __name__ == "__main__":
    main()
