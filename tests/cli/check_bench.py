#!/usr/bin/env python3
"""`troupe bench` end to end on stories260K: a 2-topology x 2-rate sweep
with tracing writes a CSV row per run with every request ok, a Markdown
table naming the bottleneck, Chrome trace files with one track per actor,
and (where matplotlib is installed) the two plots; a bad workload path
fails with a message naming it.
   check_bench.py TROUPE SHARED_DIR SOURCE_DIR WORK_DIR"""
import csv
import json
import pathlib
import shutil
import subprocess
import sys

troupe, shared, source, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
model = shared / "models/stories260K/stories260K.gguf"
out = work / "bench-out"
shutil.rmtree(out, ignore_errors=True)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


cmd = [troupe, "bench", "-m", str(model), "-w", str(source / "configs/workloads/poisson_short.json"),
       "-t", str(source / "configs/single_stage.json"), "-t", str(source / "configs/two_stages.json"),
       "--rates", "20,40", "-n", "12", "--trace", "-o", str(out),
       "--plot-script", str(source / "tools/plot_bench.py")]
r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
if r.returncode != 0:
    fail("troupe bench exited %d:\n%s" % (r.returncode, r.stderr))

rows = list(csv.DictReader(open(out / "results.csv")))
if len(rows) != 4:
    fail("expected 4 runs, got %d" % len(rows))
for row in rows:
    if row["ok"] != "12" or row["requests"] != "12":
        fail("a run lost requests: %s" % row)
    if not float(row["ttft_p50_ms"]) <= float(row["ttft_p99_ms"]) <= float(row["ttft_max_ms"]):
        fail("TTFT percentiles out of order: %s" % row)
    if float(row["output_tok_per_s"]) <= 0 or not row["bottleneck"].startswith(("executor", "sampler", "scheduler")):
        fail("no throughput or bottleneck: %s" % row)
if {row["topology"] for row in rows} != {"single_stage", "two_stages"}:
    fail("topologies: %s" % {row["topology"] for row in rows})

md = (out / "results.md").read_text()
if "(bottleneck)" not in md or "| single_stage |" not in md:
    fail("results.md lacks the tables:\n" + md)

traces = sorted(out.glob("trace_*.json"))
if len(traces) != 4:
    fail("expected 4 traces, got %s" % traces)
doc = json.loads((out / "trace_two_stages_40rps.json").read_text())
tracks = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
want = {"tokenizer", "scheduler", "executor_0", "executor_1", "sampler", "detokenizer"}
if tracks != want:
    fail("trace tracks %s, want %s" % (tracks, want))

try:
    import matplotlib  # noqa: F401
    for png in ("latency_vs_rate.png", "throughput_vs_latency.png"):
        if (out / png).stat().st_size < 10000:
            fail(png + " is missing or empty")
except ImportError:
    print("matplotlib not installed: plots not checked")

bad = subprocess.run([troupe, "bench", "-m", str(model), "-w", str(work / "no-such-workload.json")],
                     capture_output=True, text=True, timeout=60)
if bad.returncode == 0 or "no-such-workload.json" not in bad.stderr:
    fail("a missing workload must fail naming the file: rc %d, %s" % (bad.returncode, bad.stderr))
print("ok: 4 runs, 4 traces, tables and plots")
