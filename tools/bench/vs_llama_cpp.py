#!/usr/bin/env python3
"""Troupe against llama.cpp on the same GGUF files, in one run on one machine.

For each model and thread count, runs llama.cpp's llama-bench (prefill 512;
decode 32 from an empty context) and Troupe's bench_generate (prefill 512;
decode 32 after a one-token prompt, so both decode at the same short
context) back to back, each repeated and reduced to its median (llama-bench:
its mean over -r runs), and prints a Markdown table with the ratios. The llama.cpp
build is the caller's (LLAMA_BENCH or --llama-bench): this project neither
builds nor ships it.

    tools/bench/vs_llama_cpp.py --llama-bench /path/to/llama-bench \\
        --threads 1,2 --repeat 3 ~/.cache/troupe/bench/110m-q4_0.gguf ...
"""
import argparse
import json
import os
import re
import subprocess
import sys


def llama_cpp(bench, model, threads, repeat, n_prompt, n_gen):
    out = subprocess.run(
        [bench, "-m", model, "-p", str(n_prompt), "-n", str(n_gen), "-t", str(threads),
         "-r", str(repeat), "-o", "json"],
        check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0)
    return pp, tg


def troupe(bench, model, threads, repeat, n_prompt, n_gen, extra):
    out = subprocess.run(
        [bench, "--threads", str(threads), "--repeat", str(repeat), "--prefill", str(n_prompt),
         "--decode", str(n_gen)] + extra + [model],
        check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1] == str(threads) and re.match(r"^[0-9.]+$", cells[3]):
            return float(cells[3]), float(cells[4])
    raise RuntimeError("no result row in bench_generate output:\n" + out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-bench", default=os.environ.get("LLAMA_BENCH"))
    ap.add_argument("--troupe-bench", default="build/release/bench/bench_generate")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--troupe-flag", action="append", default=[], help="extra bench_generate flag")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    if not a.llama_bench:
        sys.exit("give --llama-bench or set LLAMA_BENCH")
    print("| model | threads | prefill llama.cpp | prefill Troupe | ratio | decode llama.cpp | decode Troupe | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for model in a.models:
        for t in [int(x) for x in a.threads.split(",")]:
            lpp, ltg = llama_cpp(a.llama_bench, model, t, a.repeat, a.prompt, a.gen)
            tpp, _ = troupe(a.troupe_bench, model, t, a.repeat, a.prompt, 2, a.troupe_flag)
            _, ttg = troupe(a.troupe_bench, model, t, a.repeat, 1, a.gen + 1, a.troupe_flag)
            name = os.path.basename(model).removesuffix(".gguf")
            print(f"| {name} | {t} | {lpp:.1f} | {tpp:.1f} | {tpp / lpp:.2f} | {ltg:.1f} | {ttg:.1f} | {ttg / ltg:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
