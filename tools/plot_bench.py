#!/usr/bin/env python3
"""Plots of a latency sweep: reads the sweep's results.csv (one row per run,
written by `troupe bench`'s sweep) and writes two PNGs into OUTDIR:

  latency_vs_rate.png        TTFT, ITL and E2E (P50 solid, P99 dashed) and
                             queue P99 against the offered rate, or against
                             the number of clients for closed-loop runs;
                             one line per topology (and setting).
  throughput_vs_latency.png  output tokens/s against E2E P99 and TTFT P99:
                             the load-latency curve of each topology.

Usage: plot_bench.py RESULTS.csv OUTDIR

Only the standard library and matplotlib (Agg, no display). Missing
columns and empty cells leave those points out rather than failing, so a
sweep that measured less still gets its plots.
"""

import csv
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.lines import Line2D  # noqa: E402

DPI = 100
LATENCY_FIGSIZE = (12, 9)     # inches: 1200 x 900 pixels
THROUGHPUT_FIGSIZE = (12, 5)  # 1200 x 500 pixels

# (panel title, [(column, percentile label, line style)])
LATENCY_PANELS = [
    ("Time to first token", [("ttft_p50_ms", "P50", "-"), ("ttft_p99_ms", "P99", "--")]),
    ("Inter-token latency", [("itl_p50_ms", "P50", "-"), ("itl_p99_ms", "P99", "--")]),
    ("End-to-end latency", [("e2e_p50_ms", "P50", "-"), ("e2e_p99_ms", "P99", "--")]),
    ("Queue time", [("queue_p99_ms", "P99", "--")]),
]
THROUGHPUT_PANELS = [("End-to-end P99", "e2e_p99_ms"), ("Time to first token P99", "ttft_p99_ms")]


def number(row, column):
    """The cell as a finite float, or None when the column is missing, the
    cell empty, or the text not a number."""
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return [dict(r) for r in csv.DictReader(f)]


class Run:
    """One row, with what the plots need of it."""

    def __init__(self, row, order):
        self.row = row
        self.order = order  # position in the file: the x of last resort
        self.rate = number(row, "rate")
        self.clients = number(row, "clients")
        if self.rate is not None:
            self.x_kind, self.x = "rate", self.rate
        elif self.clients is not None:
            self.x_kind, self.x = "clients", self.clients
        else:
            self.x_kind, self.x = "run", float(order)


X_LABELS = {
    "rate": "offered rate (requests/s)",
    "clients": "concurrent clients (closed loop)",
    "run": "run (no rate or clients given)",
}


def series_of(runs):
    """Groups runs into lines: topology, plus the setting when there is one,
    plus the workload when the file has several, plus the kind of x when
    open- and closed-loop runs share a file. Returns [(label, [runs sorted
    by x])] in the order the lines first appear."""
    workloads = {(r.row.get("workload") or "").strip() for r in runs}
    kinds = {r.x_kind for r in runs}
    groups = {}
    for r in runs:
        parts = [(r.row.get("topology") or "").strip() or "(no topology)"]
        setting = (r.row.get("setting") or "").strip()
        if setting:
            parts.append(setting)
        if len(workloads) > 1:
            parts.append((r.row.get("workload") or "").strip() or "(no workload)")
        if len(kinds) > 1:
            parts.append({"rate": "open loop", "clients": "closed loop", "run": "by run"}[r.x_kind])
        groups.setdefault(" / ".join(parts), []).append(r)
    return [(label, sorted(members, key=lambda r: (r.x, r.order))) for label, members in groups.items()]


def set_y_scale(ax, values):
    # Latencies under load span decades: log when every value is positive
    # and they cover at least a factor of 10; linear otherwise (zeros, a
    # single value, or a narrow range reads better on a linear axis).
    if values and min(values) > 0 and max(values) / min(values) >= 10:
        ax.set_yscale("log")


def no_data(ax):
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="gray")


def x_label(runs):
    kinds = [k for k in ("rate", "clients", "run") if any(r.x_kind == k for r in runs)]
    return " | ".join(X_LABELS[k] for k in kinds) or X_LABELS["rate"]


def plot_latency_vs_rate(runs, lines, colors, title, out_path):
    fig, axes = plt.subplots(2, 2, figsize=LATENCY_FIGSIZE, dpi=DPI, layout="constrained")
    styles_used = {}
    for ax, (panel_title, columns) in zip(axes.flat, LATENCY_PANELS):
        values = []
        for label, members in lines:
            for column, pct, style in columns:
                points = [(r.x, number(r.row, column)) for r in members]
                points = [(x, y) for x, y in points if y is not None]
                if not points:
                    continue
                ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", markersize=4,
                        color=colors[label])
                values.extend(p[1] for p in points)
                styles_used[pct] = style
        ax.set_title(panel_title + " (" + ", ".join(c[1] for c in columns) + ")")
        ax.set_xlabel(x_label(runs))
        ax.set_ylabel("ms")
        ax.grid(True, which="both", alpha=0.3)
        if values:
            set_y_scale(ax, values)
        else:
            no_data(ax)
    handles = [Line2D([], [], color=colors[label], marker="o", label=label) for label, _ in lines]
    handles += [Line2D([], [], color="black", linestyle=s, label=p) for p, s in sorted(styles_used.items())]
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize="small")
    fig.suptitle("Latency against offered load: " + title)
    fig.savefig(out_path, dpi=DPI)
    plt.close(fig)


def plot_throughput_vs_latency(lines, colors, title, out_path):
    fig, axes = plt.subplots(1, 2, figsize=THROUGHPUT_FIGSIZE, dpi=DPI, layout="constrained")
    for ax, (panel_title, column) in zip(axes.flat, THROUGHPUT_PANELS):
        values = []
        for label, members in lines:
            # In order of offered load, so each line traces its curve.
            points = [(number(r.row, "output_tok_per_s"), number(r.row, column)) for r in members]
            points = [(x, y) for x, y in points if x is not None and y is not None]
            if not points:
                continue
            ax.plot([p[0] for p in points], [p[1] for p in points], "-", marker="o", markersize=4,
                    color=colors[label], label=label)
            values.extend(p[1] for p in points)
        ax.set_title(panel_title)
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel("ms")
        ax.grid(True, which="both", alpha=0.3)
        if values:
            set_y_scale(ax, values)
            ax.legend(fontsize="small")
        else:
            no_data(ax)
    fig.suptitle("Throughput against tail latency: " + title)
    fig.savefig(out_path, dpi=DPI)
    plt.close(fig)


def main(argv):
    if len(argv) != 3:
        print("usage: plot_bench.py RESULTS.csv OUTDIR", file=sys.stderr)
        return 2
    csv_path, out_dir = Path(argv[1]), Path(argv[2])
    try:
        rows = read_rows(csv_path)
    except OSError as e:
        print(f"plot_bench.py: cannot read {csv_path}: {e.strerror}", file=sys.stderr)
        return 1
    if not rows:
        print(f"plot_bench.py: {csv_path} has no runs; the plots will be empty", file=sys.stderr)
    out_dir.mkdir(parents=True, exist_ok=True)

    runs = [Run(row, i) for i, row in enumerate(rows)]
    lines = series_of(runs)
    palette = plt.get_cmap("tab10").colors
    colors = {label: palette[i % len(palette)] for i, (label, _) in enumerate(lines)}
    title = csv_path.resolve().parent.name or csv_path.name

    written = [out_dir / "latency_vs_rate.png", out_dir / "throughput_vs_latency.png"]
    plot_latency_vs_rate(runs, lines, colors, title, written[0])
    plot_throughput_vs_latency(lines, colors, title, written[1])
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
