#!/usr/bin/env python3
"""`troupe generate` on stories260K, greedy from BOS, prints exactly the
reference text published with the model (its README, llama2.c's output)."""
import pathlib
import subprocess
import sys

troupe, shared = sys.argv[1], pathlib.Path(sys.argv[2])
readme = (shared / "models/stories260K/README.md").read_text()
section = readme[readme.index("## Reference output"):]
want = section.split("```\n", 1)[1].split("\n```", 1)[0]

out = subprocess.run(
    [troupe, "generate", "--model", str(shared / "models/stories260K/stories260K.gguf"),
     "--temperature", "0", "-n", "200", "--no-stats"],
    check=True, capture_output=True, text=True, timeout=120).stdout
got = out[:-1] if out.endswith("\n") else out  # the CLI ends its output with a newline
if got != want:
    print("troupe generate differs from the reference:\n--- want\n" + want + "\n--- got\n" + got)
    sys.exit(1)
print("ok: 200 greedy tokens match the published reference")
