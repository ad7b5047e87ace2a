#!/usr/bin/env python3
"""`--quantize` on the commands that load a model: an unknown name is refused
before anything loads, naming the accepted ones; a llama.cpp mix converts
stories260K at load and generates."""
import pathlib
import subprocess
import sys

troupe, shared = sys.argv[1], pathlib.Path(sys.argv[2])
model = str(shared / "models/stories260K/stories260K.gguf")
failures = []

for command in (["generate", "--model", model, "-n", "4"], ["serve", "--model", model, "--port", "0"],
                ["stage", "--model", model, "--layers", "0:2"]):
    p = subprocess.run([troupe, *command, "--quantize", "q4_k_s"], capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "unknown quantization 'q4_k_s'" not in p.stderr or "q4_k_m" not in p.stderr:
        failures.append(f"{command[0]} --quantize q4_k_s: rc {p.returncode}, stderr {p.stderr!r}")

base = [troupe, "generate", "--model", model, "--temperature", "0", "-n", "24", "--no-stats"]
plain = subprocess.run(base, check=True, capture_output=True, text=True, timeout=120).stdout
mixed = subprocess.run(base + ["--quantize", "Q4_K_M"], capture_output=True, text=True, timeout=120)
if mixed.returncode != 0 or len(mixed.stdout.split()) < 8 or "float weights to q4_k_m at load" not in mixed.stderr:
    failures.append(f"generate --quantize Q4_K_M: rc {mixed.returncode}, stdout {mixed.stdout!r}, "
                    f"stderr {mixed.stderr[-400:]!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: unknown names refused by generate, serve and stage; Q4_K_M generates:", mixed.stdout.strip()[:80])
print("   (f32:", plain.strip()[:80] + ")")
