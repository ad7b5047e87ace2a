#!/usr/bin/env python3
"""Builds every libFuzzer target in tests/fuzz (clang, libFuzzer + ASan +
UBSan) and runs each for a while from its seed corpus.

The parser sources the targets need are compiled once into one archive that
every target links against (the linker takes only the objects a target
uses), and recompiled only when a source or one of its headers changed.

  run_fuzzers.py --source-dir=. --work-dir=build/fuzz --seconds=3
  run_fuzzers.py ... --targets=jinja_template,gguf_model --seconds=3600
  run_fuzzers.py ... --coverage   # llvm-cov line coverage of the corpora

Run by ctest (fuzz.all) and scripts/fuzz. Exits 77 (skipped) when there is no
clang++ with libFuzzer, saying so; 1 when a target fails (the reproducer is
in WORK/crashes/TARGET/)."""
import argparse
import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

SKIP = 77

# The parser sources, relative to the source root: everything the targets
# reach, and nothing of the forward pass, the actors or the server itself.
SOURCES = [
    "core/error.cpp", "core/dtype*.cpp", "core/thread_pool.cpp", "core/base64.cpp",
    "memory/mapped_file.cpp", "memory/kv_type.cpp",
    "model/architecture.cpp", "model/arch_*.cpp",
    "model/gguf.cpp", "model/gguf_metadata.cpp", "model/gguf_model.cpp", "model/gguf_model_families.cpp",
    "model/gguf_recurrent.cpp", "model/gguf_bert.cpp", "model/gguf_classifier.cpp", "model/gguf_modernbert.cpp",
    "model/gguf_nomic_bert.cpp", "model/sequence_classifier.cpp",
    "model/gguf_vocab.cpp",
    "model/hf_config.cpp", "model/hf_8bit.cpp", "model/hf_int4.cpp", "model/hf_quantization.cpp", "model/pooling.cpp",
    "model/hf_model.cpp", "model/hf_weights.cpp", "model/model_load.cpp",
    "model/rope_scaling.cpp", "model/lora.cpp",
    "model/safetensors.cpp", "model/weight_store.cpp", "model/quant_scheme.cpp",
    "tokenizer/*.cpp",
    "net/request_parser.cpp", "net/request_field.cpp", "net/embeddings_request.cpp", "net/ollama_request.cpp", "net/ollama_chat_request.cpp", "net/anthropic_request.cpp", "net/responses_request.cpp", "net/score_request.cpp", "net/request_tools.cpp", "net/harmony_answer.cpp", "net/reasoning_split.cpp", "net/api_error.cpp", "net/server_config.cpp", "net/image_input.cpp",
    "vision/image.cpp", "vision/image_processor.cpp", "vision/vision_model.cpp", "vision/vision_mmproj.cpp",
    "actors/pipeline_config.cpp", "actors/replica_config.cpp", "actors/request_types.cpp", "model/sampler.cpp",
    "experiments/workload.cpp", "grammar/*.cpp",
    "tests/fuzz/no_forward_pass.cpp",
]
LIBS = ["-lboost_json", "-lpcre2-8", "-lutf8proc", "-lpng", "-ljpeg", "-lpthread"]
DEFINES = ["-DPCRE2_CODE_UNIT_WIDTH=8"]

# target -> (max input bytes, extra libFuzzer flags)
TARGETS = {
    "request_parser": (4096, []),
    "ws_message": (4096, []),
    "jinja_template": (8192, []),
    "tokenizer_json": (16384, []),
    "gguf_model": (65536, ["-malloc_limit_mb=512"]),
    # 96 KiB: the pre-quantized seeds keep a whole layer of the fixtures
    "safetensors_model": (98304, ["-malloc_limit_mb=512"]),
    "config_readers": (8192, []),
    # the two fixtures' mmproj files are 80 and 92 KiB
    "mmproj": (98304, ["-malloc_limit_mb=512"]),
    "json_schema": (8192, []),
    "gbnf": (8192, []),
    "tool_calls": (4096, []),
    # up to a few fixture images; 512 MiB catches a decoder that allocates past its bound
    "image_decode": (65536, ["-malloc_limit_mb=512"]),
    # the tiny fixtures' adapter GGUFs are 2 and 25 KiB
    "lora_adapter": (32768, ["-malloc_limit_mb=512"]),
}


def find_tool(names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def expand_sources(src):
    out = []
    for pattern in SOURCES:
        matches = sorted(src.glob(pattern))
        out += [p for p in matches if p.exists()]
    return out


# The parser sources compile as the unity build groups them (CMakeLists.txt):
# by folder, in sorted order, 8 files to a translation unit, so the headers
# they share are parsed and instrumented once a batch: a cold compile took
# 76 s here against 193 s one file at a time (docs/reliability.md).
UNITY_BATCH = 8


def unity_units(src, out, sources):
    """Writes OUT/unity/<folder>_<i>.cpp for each batch (only when its text
    changes, so its object stays fresh); returns [(unit, object)]."""
    by_dir = {}
    for s in sources:
        by_dir.setdefault(s.parent, []).append(s)
    units = []
    for folder, files in sorted(by_dir.items()):
        files = sorted(set(files))
        stem = str(folder.relative_to(src)).replace("/", "_")
        for i in range(0, len(files), UNITY_BATCH):
            name = f"{stem}_{i // UNITY_BATCH}"
            unit = out / "unity" / f"{name}.cpp"
            text = "".join(f'#include "{f}"\n' for f in files[i:i + UNITY_BATCH])
            if not unit.exists() or unit.read_text() != text:
                unit.parent.mkdir(parents=True, exist_ok=True)
                unit.write_text(text)
            units.append((unit, out / "obj" / "unity" / f"{name}.o"))
    return units


def dep_files(dfile):
    """The files a Make-style .d file lists (the object's inputs)."""
    try:
        text = dfile.read_text()
    except OSError:
        return None
    text = text.replace("\\\n", " ")
    _, _, deps = text.partition(":")
    return [pathlib.Path(d) for d in deps.split()]


def stale(obj, dfile):
    if not obj.exists():
        return True
    deps = dep_files(dfile)
    if deps is None:
        return True
    t = obj.stat().st_mtime
    return any((not d.exists()) or d.stat().st_mtime > t for d in deps)


def compile_one(clang, flags, src_root, source, obj):
    obj.parent.mkdir(parents=True, exist_ok=True)
    dfile = obj.with_suffix(".d")
    cmd = [clang, *flags, "-I", str(src_root), "-MMD", "-MF", str(dfile), "-c", str(source), "-o", str(obj)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return source, r


def build(args, clang, flavour):
    """Compiles the sources (when stale) into WORK/<flavour>/libparsers.a and
    links one binary per target; returns {target: binary} or None."""
    src = pathlib.Path(args.source_dir).resolve()
    out = pathlib.Path(args.work_dir).resolve() / (flavour if args.opt == 1 or flavour != "fuzz" else f"fuzz-O{args.opt}")
    if flavour == "fuzz":
        san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
        flags = ["-std=c++20", f"-O{args.opt}", "-gline-tables-only", "-fsanitize=fuzzer-no-link", *san, *DEFINES,
                 f'-DTROUPE_FIXTURES_DIR="{src}/tests/fixtures"']
        link = ["-fsanitize=fuzzer", *san]
    else:  # coverage: no sanitizers, the same libFuzzer driver run over the corpus once
        cov = ["-fprofile-instr-generate", "-fcoverage-mapping"]
        flags = ["-std=c++20", "-O0", "-g", "-fsanitize=fuzzer-no-link", *cov, *DEFINES,
                 f'-DTROUPE_FIXTURES_DIR="{src}/tests/fixtures"']
        link = ["-fsanitize=fuzzer", *cov]
    units = unity_units(src, out, expand_sources(src))
    jobs = [(unit, obj) for unit, obj in units if stale(obj, obj.with_suffix(".d"))]
    targets = args.targets
    for t in targets:
        source = src / "tests/fuzz" / f"{t}_fuzz.cpp"
        obj = out / "obj" / "targets" / f"{t}_fuzz.o"
        if stale(obj, obj.with_suffix(".d")):
            jobs.append((source, obj))
    if jobs:
        print(f"compiling {len(jobs)} files ({flavour}, {args.jobs} at a time)", flush=True)
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda j: compile_one(clang, flags, src, *j), jobs))
        failed = [(s, r) for s, r in results if r.returncode != 0]
        for s, r in failed:
            print(f"compile failed: {s}\n{r.stderr[-6000:]}")
        if failed:
            if any("fsanitize=fuzzer" in r.stderr for _, r in failed):
                return "skip"
            return None
        print(f"compiled in {time.time() - t0:.0f} s", flush=True)
    archive = out / "libparsers.a"
    objs = [obj for _, obj in units]
    if jobs or not archive.exists():
        archive.unlink(missing_ok=True)
        ar = find_tool(["llvm-ar", "llvm-ar-14", "ar"])
        subprocess.run([ar, "rcs", str(archive), *map(str, objs)], check=True)
    binaries = {}
    for t in targets:
        obj = out / "obj" / "targets" / f"{t}_fuzz.o"
        binary = out / f"{t}_fuzz"
        if not binary.exists() or binary.stat().st_mtime < max(obj.stat().st_mtime, archive.stat().st_mtime):
            r = subprocess.run([clang, *link, str(obj), str(archive), *LIBS, "-o", str(binary)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"link failed: {t}\n{r.stderr[-6000:]}")
                if "libclang_rt.fuzzer" in r.stderr:
                    return "skip"
                return None
        binaries[t] = binary
    return binaries


def seeds_of(src, target):
    # The image decoder's seeds are the image fixtures themselves (PNG and
    # JPEG of every layout the tests decode), kept in one place.
    if target == "image_decode":
        return src / "tests/fixtures/images"
    # Likewise the adapters' (the GGUFs, and PEFT's files beside them).
    if target == "lora_adapter":
        return src / "tests/fixtures/lora"
    return src / "tests/fuzz/corpus" / target


def fuzz(args, binaries):
    src = pathlib.Path(args.source_dir).resolve()
    work = pathlib.Path(args.work_dir).resolve()
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=0",
               UBSAN_OPTIONS="print_stacktrace=1")
    # The model targets write each input to a scratch file: in memory, where
    # there is a tmpfs, so a busy disk is not mistaken for a hang.
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        env["TMPDIR"] = "/dev/shm"
    failures = []
    for t, binary in binaries.items():
        max_len, extra = TARGETS[t]
        corpus = work / "corpus" / t
        corpus.mkdir(parents=True, exist_ok=True)
        crashes = work / "crashes" / t
        crashes.mkdir(parents=True, exist_ok=True)
        cmd = [str(binary), f"-max_total_time={args.seconds}", "-timeout=30", "-rss_limit_mb=2048",
               f"-max_len={max_len}", f"-artifact_prefix={crashes}/", "-print_final_stats=1", *extra]
        dictionary = src / "tests/fuzz/dict" / f"{t}.dict"
        if dictionary.exists():
            cmd.append(f"-dict={dictionary}")
        cmd += [str(corpus), str(seeds_of(src, t))]
        print(f"== {t}: {args.seconds} s", flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        stats = dict(re.findall(r"^stat::(\w+):\s*(\d+)", r.stderr, re.M))
        print(f"   {stats.get('number_of_executed_units', '?')} executions, "
              f"{stats.get('average_exec_per_sec', '?')}/s, corpus {len(list(corpus.iterdir()))} files", flush=True)
        if args.log_dir:
            pathlib.Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            (pathlib.Path(args.log_dir) / f"{t}.log").write_text(r.stderr)
        if r.returncode != 0:
            print(r.stderr[-6000:])
            print(f"   FAILED (exit {r.returncode}); reproducer in {crashes}/")
            failures.append(t)
    return failures


def coverage(args, binaries):
    """Runs each coverage binary once over its seeds and grown corpus and
    prints llvm-cov's line coverage per parser source."""
    src = pathlib.Path(args.source_dir).resolve()
    work = pathlib.Path(args.work_dir).resolve()
    profdata_tool = find_tool(["llvm-profdata", "llvm-profdata-14"])
    cov_tool = find_tool(["llvm-cov", "llvm-cov-14"])
    raws = []
    for t, binary in binaries.items():
        raw = work / "coverage" / f"{t}.profraw"
        raw.parent.mkdir(parents=True, exist_ok=True)
        corpus = work / "corpus" / t
        corpus.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, LLVM_PROFILE_FILE=str(raw))
        subprocess.run([str(binary), "-runs=0", f"-artifact_prefix={raw.parent}/", str(corpus), str(seeds_of(src, t))],
                       env=env,
                       capture_output=True, text=True)
        raws.append(raw)
    merged = work / "coverage" / "all.profdata"
    subprocess.run([profdata_tool, "merge", "-sparse", *map(str, raws), "-o", str(merged)], check=True)
    objects = []
    for i, binary in enumerate(binaries.values()):
        objects += ([str(binary)] if i == 0 else ["-object", str(binary)])
    sources = [str(p) for p in expand_sources(src)]
    r = subprocess.run([cov_tool, "report", f"-instr-profile={merged}", *objects, *sources],
                       capture_output=True, text=True, check=True)
    print(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--seconds", type=int, default=3, help="per target")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--opt", type=int, default=1, choices=[0, 1, 2],
                    help="-O level; 0 compiles in about half the time (CI's short runs), 1 fuzzes faster")
    ap.add_argument("--log-dir", default="", help="keep each target's libFuzzer output here")
    ap.add_argument("--coverage", action="store_true", help="line coverage of the corpora instead of fuzzing")
    args = ap.parse_args()
    args.targets = [t for t in args.targets.split(",") if t]
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        print(f"unknown targets {unknown}; known: {list(TARGETS)}")
        return 2

    clang = find_tool(["clang++", "clang++-16", "clang++-15", "clang++-14"])
    if clang is None:
        print("skipped: no clang++ found (Debian: apt-get install clang-14) to build the libFuzzer targets")
        return SKIP
    binaries = build(args, clang, "coverage" if args.coverage else "fuzz")
    if binaries == "skip":
        print("skipped: this clang has no libFuzzer runtime")
        return SKIP
    if binaries is None:
        return 1
    if args.coverage:
        coverage(args, binaries)
        return 0
    failures = fuzz(args, binaries)
    if failures:
        print(f"the fuzzers found failures in: {', '.join(failures)}")
        return 1
    print(f"ok: {len(binaries)} targets, {args.seconds} s each, no failure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
