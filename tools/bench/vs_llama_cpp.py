#!/usr/bin/env python3
"""Troupe against llama.cpp on the same GGUF files, in one run on one machine.

For each model and thread count, runs llama.cpp's llama-bench (prefill 512;
decode 32 from an empty context) and Troupe's bench_generate (prefill 512;
decode 32 after a one-token prompt, so both decode at the same short
context) back to back, each repeated and reduced to its median (llama-bench:
its mean over -r runs). With --rounds R it does that R times, alternating
which engine and which thread count goes first, and reports the median of
each engine's rounds and the median and range of the per-round ratios (and,
after the table, each round's thread scaling): on a shared machine whose
speed drifts over minutes, a ratio of two runs seconds apart is steadier
than either figure. The llama.cpp build is the caller's (LLAMA_BENCH or
--llama-bench): this project neither builds nor ships it.

    tools/bench/vs_llama_cpp.py --llama-bench /path/to/llama-bench \\
        --threads 1,2 --repeat 3 --rounds 3 ~/.cache/troupe/bench/110m-q4_0.gguf ...
"""
import argparse
import json
import os
import re
import statistics
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
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds per cell")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    if not a.llama_bench:
        sys.exit("give --llama-bench or set LLAMA_BENCH")
    threads = [int(x) for x in a.threads.split(",")]
    print("| model | threads | prefill llama.cpp | prefill Troupe | ratio | range | decode llama.cpp | decode Troupe "
          "| ratio | range |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    span = lambda v: f"{min(v):.2f}-{max(v):.2f}" if len(v) > 1 else ""
    scaling = []  # printed after the table: (model, per-round ratios of the last thread count to the first)
    for model in a.models:
        name = os.path.basename(model).removesuffix(".gguf")
        rows = {t: [] for t in threads}  # (llama pp, llama tg, troupe pp, troupe tg) per round
        for r in range(max(1, a.rounds)):
            # The thread counts in turn within a round, so that each round's
            # scaling compares runs seconds apart, not minutes.
            for t in threads if r % 2 == 0 else threads[::-1]:
                def ours():
                    pp, _ = troupe(a.troupe_bench, model, t, a.repeat, a.prompt, 2, a.troupe_flag)
                    _, tg = troupe(a.troupe_bench, model, t, a.repeat, 1, a.gen + 1, a.troupe_flag)
                    return pp, tg
                if r % 2 == 0:
                    lpp, ltg = llama_cpp(a.llama_bench, model, t, a.repeat, a.prompt, a.gen)
                    tpp, ttg = ours()
                else:
                    tpp, ttg = ours()
                    lpp, ltg = llama_cpp(a.llama_bench, model, t, a.repeat, a.prompt, a.gen)
                rows[t].append((lpp, ltg, tpp, ttg))
        for t in threads:
            col = lambda i: statistics.median(x[i] for x in rows[t])
            pp_ratios = [x[2] / x[0] for x in rows[t]]
            tg_ratios = [x[3] / x[1] for x in rows[t]]
            print(f"| {name} | {t} | {col(0):.1f} | {col(2):.1f} | {statistics.median(pp_ratios):.2f} | "
                  f"{span(pp_ratios)} | {col(1):.1f} | {col(3):.1f} | {statistics.median(tg_ratios):.2f} | "
                  f"{span(tg_ratios)} |", flush=True)
        if len(threads) > 1:
            lo, hi = rows[threads[0]], rows[threads[-1]]
            scaling.append((name, [[h[i] / l[i] for l, h in zip(lo, hi)] for i in range(4)]))
    if scaling:
        print(f"\nThread scaling, {threads[-1]} threads against {threads[0]} within each round (median, range):\n")
        print("| model | prefill llama.cpp | prefill Troupe | range | decode llama.cpp | decode Troupe | range |")
        print("|---|---|---|---|---|---|---|")
        for name, r in scaling:
            med = [statistics.median(v) for v in r]
            print(f"| {name} | {med[0]:.2f} | {med[2]:.2f} | {span(r[2])} | {med[1]:.2f} | {med[3]:.2f} | "
                  f"{span(r[3])} |")

if __name__ == "__main__":
    main()
