#!/usr/bin/env python3
"""Builds the request-parser fuzz target with clang's libFuzzer (plus ASan and
UBSan) and runs it for a short time from the seed corpus. Run by ctest
(net.fuzz_request_parser); exits 77 (skipped) when no clang++ with libFuzzer
is available, saying so. Longer runs: --seconds=600."""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys

SKIP = 77


def find_clang():
    for name in ("clang++", "clang++-16", "clang++-15", "clang++-14"):
        path = shutil.which(name)
        if path:
            return path
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--seconds", type=int, default=20)
    args = ap.parse_args()

    src = pathlib.Path(args.source_dir)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    clang = find_clang()
    if clang is None:
        print("skipped: no clang++ found (Debian: apt-get install clang-14) to build the libFuzzer target")
        return SKIP

    sources = [src / "tests/net/fuzz/request_parser_fuzz.cpp", src / "net/request_parser.cpp",
               src / "net/api_error.cpp", src / "core/error.cpp"]
    headers = list((src / "net").glob("*.hpp")) + [src / "actors/request_types.hpp", src / "model/sampler.hpp"]
    binary = work / "request_parser_fuzz"
    newest = max(p.stat().st_mtime for p in sources + headers)
    if not binary.exists() or binary.stat().st_mtime < newest:
        cmd = [clang, "-std=c++20", "-O1", "-g", "-fsanitize=fuzzer,address,undefined",
               "-fno-sanitize-recover=undefined", "-I", str(src), *map(str, sources),
               "-lboost_json", "-o", str(binary)]
        print("building:", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            if "fsanitize=fuzzer" in r.stderr and ("unsupported" in r.stderr or "libclang_rt.fuzzer" in r.stderr):
                print("skipped: this clang has no libFuzzer runtime\n" + r.stderr[-2000:])
                return SKIP
            print(r.stdout + r.stderr)
            return 1

    corpus = work / "corpus"
    corpus.mkdir(exist_ok=True)
    seeds = src / "tests/net/fuzz/corpus"
    crashes = work / "crashes"
    crashes.mkdir(exist_ok=True)
    cmd = [str(binary), f"-max_total_time={args.seconds}", "-timeout=10", "-rss_limit_mb=2048",
           "-max_len=4096", f"-artifact_prefix={crashes}/", "-print_final_stats=1", str(corpus), str(seeds)]
    print("running:", " ".join(cmd), flush=True)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    tail = r.stderr[-4000:]
    print(tail)
    if r.returncode != 0:
        print(f"the fuzzer found a failure (exit {r.returncode}); reproducer in {crashes}")
        return 1
    print(f"ok: {args.seconds} s of fuzzing without a failure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
