// Sweeps: one workload over several topologies, settings and load levels,
// each combination a fresh pipeline (or, with `server`, a running server),
// reduced to a RunSummary row; results.csv, results.md, optional traces
// and the plots (tools/plot_bench.py) land in one output folder.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "experiments/run_summary.hpp"

namespace troupe {

// A topology-file key to vary ("scheduler.max_batch_size") and its values
// as JSON literals ("8", "true").
struct SettingAxis {
  std::string key;
  std::vector<std::string> values;
};

struct SweepSpec {
  std::string model_path;               // in-process runs
  std::vector<std::string> topologies;  // configs/*.json; empty: one stage with every layer
  std::string workload_path;
  std::vector<double> rates;            // Poisson rates to run; with clients empty too: the workload's own load
  std::vector<int32_t> clients;         // closed-loop client counts to run
  std::vector<SettingAxis> settings;    // every combination of their values
  int32_t requests = 0;                 // overrides the workload's count when > 0
  bool trace = false;                   // trace each run, write trace_<run>.json and the actor table
  bool warmup = true;                   // one short request before measuring each pipeline
  std::string server;                   // "host:port": run against that server instead
  std::string out_dir;                  // empty: write nothing
  std::string plot_script;              // tools/plot_bench.py; empty: no plots
};

// JSON file (configs/sweeps/*.json) -> spec; relative paths are relative to
// the file's folder. Keys are those of SweepSpec.
SweepSpec load_sweep(const std::string& path);

// Runs every combination in order, printing a line per run to `log`.
std::vector<RunSummary> run_sweep(const SweepSpec& spec, std::ostream& log);

}  // namespace troupe
