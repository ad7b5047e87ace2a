#!/usr/bin/env python3
"""Writes a roberta-base-shaped cross-encoder for the rerank benchmark
(tools/bench/rerank_vs_llama_cpp.py): random weights (no model hub here) in
bge-reranker-base's shape but for its vocabulary (RobertaForSequenceClassification,
12 layers, 768 wide, 12 heads, FFN 3072, 512 positions after the pad offset,
one label), saved by sentence-transformers' CrossEncoder as OUT/, and
converted by llama.cpp's own converter into OUT.<type>.gguf.

The tokenizer is RoBERTa's: GPT-2's byte-level BPE from
../shared/tokenizers/gpt2, the ids moved up by four for <s>, <pad>, </s> and
<unk> (pad_token_id 1, as RoBERTa's position offset needs), and
RobertaProcessing's pairs (<s> A </s></s> B </s>). XLM-R's 250,002-piece
SentencePiece model (bge-reranker-base's own) is not available here (no
model hub), and for BERT rerankers llama.cpp's converter drops the pooler:
RoBERTa is the reranker both servers compute alike.

    /work/refenv/bin/python tools/bench/make_reranker_checkpoint.py \\
        --llama-cpp /path/to/llama.cpp --out ~/.cache/troupe/bench/roberta-reranker --outtype f16

With --modernbert: a ModernBertForSequenceClassification in
gte-reranker-modernbert-base's shape instead (22 layers, 768 wide, FFN 1152,
every third layer global, local_attention 128, [CLS] A [SEP] B [SEP] over
the same GPT-2 BPE with [CLS], [PAD], [SEP], [UNK] first).
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from sentence_transformers import CrossEncoder
from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE
from transformers import (ModernBertConfig, ModernBertForSequenceClassification, PreTrainedTokenizerFast, RobertaConfig,
                          RobertaForSequenceClassification)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "fixtures"))
import fixture_common as fc  # noqa: E402

SPECIAL = ["<s>", "<pad>", "</s>", "<unk>"]


MODERNBERT_SPECIAL = ["[CLS]", "[PAD]", "[SEP]", "[UNK]"]


def tokenizer(gpt2_dir, modernbert=False):
    special = MODERNBERT_SPECIAL if modernbert else SPECIAL
    bpe = json.loads((gpt2_dir / "encoder.json").read_text())
    vocab = {t: i for i, t in enumerate(special)}
    for token, i in sorted(bpe.items(), key=lambda kv: kv[1]):
        vocab[token] = len(special) + i
    lines = (gpt2_dir / "vocab.bpe").read_text(encoding="utf-8").splitlines()
    merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
    tok = Tokenizer(BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if modernbert:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 0), ("[SEP]", 2)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                                       unk_token="[UNK]", model_max_length=8192)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", pad_token="<pad>", unk_token="<unk>", model_max_length=512)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--outtype", default="f16", help="the GGUF's type (llama.cpp converter's --outtype)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--modernbert", action="store_true",
                    help="a ModernBERT-base-shaped reranker (gte-reranker-modernbert-base's shape) instead")
    args = ap.parse_args()

    tok = tokenizer(args.shared / "tokenizers" / "gpt2", args.modernbert)
    if args.modernbert:
        cfg = ModernBertConfig(vocab_size=len(tok), hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
                               num_attention_heads=12, max_position_embeddings=8192, global_attn_every_n_layers=3,
                               local_attention=128, global_rope_theta=160000.0, local_rope_theta=10000.0,
                               pad_token_id=1, bos_token_id=0, eos_token_id=2, cls_token_id=0, sep_token_id=2,
                               num_labels=1, classifier_pooling="cls")
        model_class = ModernBertForSequenceClassification
    else:
        model_class = RobertaForSequenceClassification
        cfg = RobertaConfig(vocab_size=len(tok), hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                            intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1, hidden_act="gelu",
                            layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, num_labels=1)
    torch.manual_seed(0)
    model = model_class(cfg).eval()
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        shutil.rmtree(args.out, ignore_errors=True)
        CrossEncoder(tmp, device="cpu").save(str(args.out))
    gguf = args.out.with_name(args.out.name + f".{args.outtype}.gguf")
    fc.convert_with_llama_cpp(args.llama_cpp.resolve(), args.out, gguf, outtype=args.outtype, pre="gpt-2")
    if args.modernbert:
        add_layer_norm_key(args.llama_cpp.resolve(), gguf)
    print(f"{args.out}/ and {gguf}")


def add_layer_norm_key(llama_cpp, path):
    """llama.cpp's converter writes ModernBERT's LayerNorm epsilon under
    attention.layer_norm_rms_epsilon, and its loader (as vendored in
    llama-cpp-python 0.3.36) reads attention.layer_norm_epsilon, so it
    refuses its own conversion. The file is copied with that key added
    (the same value): the baseline then loads. Troupe reads either."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    sys.path.insert(0, str(llama_cpp / "gguf-py" / "gguf" / "scripts"))
    from gguf_new_metadata import MetadataDetails, copy_with_new_metadata
    reader = GGUFReader(path)
    eps = float(reader.fields["modern-bert.attention.layer_norm_rms_epsilon"].contents())
    fixed = path.with_suffix(".fixed")
    writer = GGUFWriter(fixed, arch="modern-bert", endianess=reader.endianess)
    copy_with_new_metadata(reader, writer, {
        "modern-bert.attention.layer_norm_epsilon": MetadataDetails(GGUFValueType.FLOAT32, eps)}, [])
    fixed.replace(path)


if __name__ == "__main__":
    main()
