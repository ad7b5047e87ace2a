#!/usr/bin/env python3
"""Writes a bge-small-en-v1.5-shaped BERT embedding model for the embedding
benchmarks (tools/bench/embeddings_vs_llama_cpp.py): random weights (no
model hub here) in the release's shape (BertModel, 12 layers, 384 wide, 12
heads, FFN 1536, 512 positions, 30,522 tokens, erf GELU), CLS pooling and
Normalize as bge does, saved by sentence-transformers as OUT/, and
converted by llama.cpp's own converter into OUT.<type>.gguf.

The vocabulary is a lower-cased WordPiece of 30,522 pieces made from GPT-2's
BPE vocabulary in ../shared/tokenizers/gpt2 (a piece after a space becomes
a word, one inside a word a "##" piece, in GPT-2's frequency order), so
English text splits into about as many pieces as bert-base-uncased's.

    /work/refenv/bin/python tools/bench/make_bert_checkpoint.py \\
        --llama-cpp /path/to/llama.cpp --out ~/.cache/troupe/bench/bge-small-shaped --outtype f16

With --nomic, a nomic-embed-text-v1.5-shaped NomicBERT instead
(NomicBertModel, 12 layers, 768 wide, 12 heads, SwiGLU FFN 3072, RoPE base
1000, the same WordPiece with the embedding table padded to 30,528 rows as
nomic's is; mean pooling and Normalize). OUT/ holds nomic's published
config spelling (what users download and what llama.cpp's converter
reads), OUT.transformers/ the same weights in transformers' spelling, for
embedding_agreement.py's --reference (sentence-transformers reads only that).
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer, models
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import BertConfig, BertModel, BertTokenizerFast, NomicBertConfig, NomicBertModel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "fixtures"))
import fixture_common as fc  # noqa: E402
import make_nomic_bert_models as nomic  # noqa: E402
N_VOCAB = 30522
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def wordpiece_vocab(encoder_json):
    """GPT-2's pieces as WordPiece pieces: "Ġword" -> "word", "piece" -> "##piece"."""
    bpe = json.loads(Path(encoder_json).read_text())
    vocab = {t: i for i, t in enumerate(SPECIAL)}
    chars = [chr(c) for c in range(33, 127)]
    for c in chars:  # every printable ASCII character, alone and continuing a word
        vocab.setdefault(c.lower(), len(vocab))
        vocab.setdefault("##" + c.lower(), len(vocab))
    for token, _ in sorted(bpe.items(), key=lambda kv: kv[1]):
        word_start = token.startswith("\u0120")
        piece = (token[1:] if word_start else token).lower()
        if not piece or not all(c.isalnum() and c.isascii() for c in piece):
            continue
        vocab.setdefault(piece if word_start else "##" + piece, len(vocab))
        if len(vocab) == N_VOCAB:
            break
    assert len(vocab) == N_VOCAB, len(vocab)
    return vocab


def tokenizer(vocab):
    tok = Tokenizer(WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return BertTokenizerFast(tokenizer_object=tok, model_max_length=512, unk_token="[UNK]", cls_token="[CLS]",
                             sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--outtype", default="f16", help="the GGUF's type (llama.cpp converter's --outtype)")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--nomic", action="store_true", help="a nomic-embed-text-v1.5-shaped NomicBERT")
    args = ap.parse_args()

    tok = tokenizer(wordpiece_vocab(args.shared / "tokenizers" / "gpt2" / "encoder.json"))
    if args.nomic:
        cfg = NomicBertConfig(vocab_size=30528, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                              intermediate_size=3072, max_position_embeddings=2048, type_vocab_size=2,
                              layer_norm_eps=1e-12, rope_parameters={"rope_type": "default", "rope_theta": 1000.0})
        model_class, pooling = NomicBertModel, "mean"
    else:
        cfg = BertConfig(vocab_size=N_VOCAB, hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                         intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
                         layer_norm_eps=1e-12)
        model_class, pooling = BertModel, "cls"
    torch.manual_seed(0)
    model = model_class(cfg).eval()
    reference = args.out.with_name(args.out.name + ".transformers") if args.nomic else args.out
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        word = models.Transformer(tmp)
        pool = models.Pooling(word.get_word_embedding_dimension(), pooling_mode=pooling)
        st = SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu")
        shutil.rmtree(reference, ignore_errors=True)
        st.save(str(reference))
    if args.nomic:
        shutil.rmtree(args.out, ignore_errors=True)
        shutil.copytree(reference, args.out)
        config = args.out / "config.json"
        config.write_text(json.dumps(nomic.published_config(json.loads(config.read_text())), indent=2) + "\n")
    gguf = args.out.with_name(args.out.name + f".{args.outtype}.gguf")
    # The made-up vocabulary's pre-tokenizer hash is unknown to the converter,
    # and a WordPiece vocabulary has no pre-tokenizer setting in llama.cpp.
    fc.convert_with_llama_cpp(args.llama_cpp.resolve(), args.out, gguf, outtype=args.outtype, pre="default",
                              raw_config=args.nomic)
    print(f"{args.out}/ and {gguf}")


if __name__ == "__main__":
    main()
