"""tools/plot_bench.py on synthetic sweeps: a full one (2 topologies x 3
rates) gives two PNGs of the documented size that matplotlib reads back;
a sparse one (closed loop, missing columns, empty cells, a single point)
and an empty one still give both plots."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import matplotlib.image as mpimg
except ImportError:
    pytest.skip("matplotlib is not installed (pip install -r tools/requirements-bench.txt)",
                allow_module_level=True)

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "plot_bench.py"

COLUMNS = [
    "topology", "workload", "rate", "clients", "setting", "requests", "ok", "duration_s", "req_per_s",
    "output_tok_per_s", "total_tok_per_s",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "ttft_max_ms",
    "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "itl_max_ms",
    "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "e2e_max_ms",
    "queue_p50_ms", "queue_p90_ms", "queue_p99_ms", "queue_max_ms",
    "preemptions", "kv_peak_blocks", "kv_total_blocks", "prefix_hit_rate",
]


def write_csv(path, columns, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def synthetic_row(topology, rate, slowdown):
    # Latency grows with load, faster for the slower topology.
    load = rate * slowdown
    row = {c: "" for c in COLUMNS}
    row.update(topology=topology, workload="poisson-short", rate=rate, clients="", setting="",
               requests=64, ok=64, duration_s=64 / rate, req_per_s=rate * 0.98,
               output_tok_per_s=rate * 120, total_tok_per_s=rate * 250,
               preemptions=int(load), kv_peak_blocks=int(10 * load), kv_total_blocks=256,
               prefix_hit_rate=0.25)
    for name, base in (("ttft", 20.0), ("itl", 4.0), ("e2e", 600.0), ("queue", 1.0)):
        for pct, factor in (("p50", 1.0), ("p90", 1.8), ("p99", 3.0), ("max", 4.0)):
            row[f"{name}_{pct}_ms"] = round(base * factor * (1 + load * load / 4), 3)
    return row


def run_script(csv_path, out_dir):
    r = subprocess.run([sys.executable, str(SCRIPT), str(csv_path), str(out_dir)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def check_png(path, shape):
    assert path.is_file(), f"{path} was not written"
    assert path.stat().st_size > 10_000, f"{path} is suspiciously small ({path.stat().st_size} bytes)"
    image = mpimg.imread(str(path))
    assert image.shape == shape
    assert image.std() > 0.01, f"{path} is blank"


def test_two_topologies_three_rates(tmp_path):
    rows = [synthetic_row(t, rate, slow) for t, slow in (("single", 1.0), ("pipeline2", 1.6)) for rate in (1, 4, 8)]
    csv_path = tmp_path / "sweep" / "results.csv"
    csv_path.parent.mkdir()
    write_csv(csv_path, COLUMNS, rows)
    out_dir = tmp_path / "plots"
    r = run_script(csv_path, out_dir)
    check_png(out_dir / "latency_vs_rate.png", (900, 1200, 4))
    check_png(out_dir / "throughput_vs_latency.png", (500, 1200, 4))
    assert "latency_vs_rate.png" in r.stdout


def test_sparse_results_still_plot(tmp_path):
    # Closed loop (no rate), one topology with a single point, columns
    # missing (no ITL, no queue), empty and unparseable cells.
    columns = ["topology", "rate", "clients", "setting", "output_tok_per_s", "ttft_p50_ms", "ttft_p99_ms",
               "e2e_p50_ms", "e2e_p99_ms"]
    rows = [
        {"topology": "single", "rate": "", "clients": 1, "setting": "kv=64", "output_tok_per_s": 100,
         "ttft_p50_ms": 5, "ttft_p99_ms": 9, "e2e_p50_ms": 300, "e2e_p99_ms": 420},
        {"topology": "single", "rate": "", "clients": 4, "setting": "kv=64", "output_tok_per_s": 310,
         "ttft_p50_ms": 12, "ttft_p99_ms": "", "e2e_p50_ms": 350, "e2e_p99_ms": "nan"},
        {"topology": "tp2", "rate": "", "clients": 2, "setting": "", "output_tok_per_s": "",
         "ttft_p50_ms": 0, "ttft_p99_ms": 7, "e2e_p50_ms": "n/a", "e2e_p99_ms": 380},
    ]
    csv_path = tmp_path / "results.csv"
    write_csv(csv_path, columns, rows)
    run_script(csv_path, tmp_path / "out")
    check_png(tmp_path / "out" / "latency_vs_rate.png", (900, 1200, 4))
    check_png(tmp_path / "out" / "throughput_vs_latency.png", (500, 1200, 4))


def test_no_runs_gives_empty_plots_and_a_warning(tmp_path):
    csv_path = tmp_path / "results.csv"
    write_csv(csv_path, COLUMNS, [])
    r = run_script(csv_path, tmp_path / "out")
    assert "no runs" in r.stderr
    assert (tmp_path / "out" / "latency_vs_rate.png").is_file()
    assert (tmp_path / "out" / "throughput_vs_latency.png").is_file()


def test_usage_and_unreadable_file(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage" in r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "missing.csv"), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "missing.csv" in r.stderr
