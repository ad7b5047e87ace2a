#!/usr/bin/env python3
"""`troupe embed` on the sentence-transformers fixtures: each text's vector
and token count as sentence-transformers computed them (reference.json,
tools/fixtures/make_embedding_models.py); an input longer than the context
is an error naming it."""
import json
import pathlib
import subprocess
import sys

troupe = sys.argv[1]
fixtures = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
TOLERANCE = 2e-5  # as tests/model/embedding_model_test.cpp
failures = []

for name in ("qwen3_embedding", "llama_embedding_mean"):
    ref = json.loads((fixtures / name / "reference.json").read_text())
    p = subprocess.run([troupe, "embed", "-m", str(fixtures / name), "-t", "1", *ref["texts"]],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        failures.append(f"{name}: rc {p.returncode}: {p.stderr[-400:]}")
        continue
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    if [line["index"] for line in lines] != list(range(len(ref["texts"]))):
        failures.append(f"{name}: lines {p.stdout[:200]!r}")
        continue
    for line, want, ids in zip(lines, ref["embeddings"], ref["token_ids"]):
        worst = max(abs(a - b) for a, b in zip(line["embedding"], want))
        if len(line["embedding"]) != len(want) or worst > TOLERANCE or line["tokens"] != len(ids):
            failures.append(f"{name} text {line['index']}: {len(line['embedding'])} dims, worst {worst}, "
                            f"{line['tokens']} tokens (want {len(ids)})")

p = subprocess.run([troupe, "embed", "-m", str(fixtures / "qwen3_embedding"), "--ctx", "8", "-t", "1", "short",
                    "a text well beyond eight tokens of context"], capture_output=True, text=True, timeout=120)
if p.returncode == 0 or "text 1" not in p.stderr or "context holds 8" not in p.stderr:
    failures.append(f"too long: rc {p.returncode}, stderr {p.stderr!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: troupe embed gives sentence-transformers' vectors; an input past the context is refused")
