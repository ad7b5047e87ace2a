// `troupe bench`: latency experiments. Runs a workload (configs/workloads/)
// over one or more topologies (configs/*.json), settings and load levels,
// in-process or against a running server, and writes results.csv,
// results.md, plots and, with --trace, a Chrome trace per run.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "experiments/sweep.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/cpu_options.hpp"
#include "tools/cli/default_model.hpp"

namespace troupe::cli {
namespace {

struct BenchArgs {
  CpuArgs cpu;
  std::string sweep;
  std::string model;
  std::string workload;
  std::vector<std::string> topologies;
  std::vector<double> rates;
  std::vector<int32_t> clients;
  std::vector<std::string> settings;  // key=v1,v2,...
  int32_t requests = 0;
  bool trace = false;
  bool no_plot = false;
  bool no_warmup = false;
  std::string server;
  std::string out;
  std::string plot_script;
  std::string device;
  int64_t gpu_layers = -1;
  std::string kv_type;    // empty: the topology's
  std::string kv_memory;  // empty: the topology's
};

// "scheduler.max_batch_size=8,32,128" -> axis.
SettingAxis parse_setting(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
    throw Error(Errc::invalid_argument, "--set wants key=value[,value...], got '" + s + "'");
  }
  SettingAxis a{.key = s.substr(0, eq)};
  std::stringstream rest(s.substr(eq + 1));
  for (std::string v; std::getline(rest, v, ',');) {
    if (v.empty()) continue;
    // Bare words other than JSON literals are strings.
    const bool literal = v == "true" || v == "false" || v == "null" || v[0] == '"' || v[0] == '[' || v[0] == '{' ||
                         v[0] == '-' || std::isdigit(static_cast<unsigned char>(v[0]));
    a.values.push_back(literal ? v : "\"" + v + "\"");
  }
  return a;
}

// tools/plot_bench.py beside the working directory, or in the source tree
// this binary was built from.
std::string find_plot_script() {
  for (const std::string& p : {std::string("tools/plot_bench.py"), std::string(TROUPE_SOURCE_DIR) + "/tools/plot_bench.py"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return {};
}

void run(const BenchArgs& a) {
  apply_cpu_options(a.cpu);
  SweepSpec s = a.sweep.empty() ? SweepSpec{} : load_sweep(a.sweep);
  if (!a.model.empty()) s.model_path = a.model;
  if (s.model_path.empty()) s.model_path = default_model_path();
  if (!a.workload.empty()) s.workload_path = a.workload;
  if (!a.topologies.empty()) s.topologies = a.topologies;
  if (!a.rates.empty()) s.rates = a.rates;
  if (!a.clients.empty()) s.clients = a.clients;
  for (const std::string& x : a.settings) s.settings.push_back(parse_setting(x));
  // --device / --gpu-layers are topology keys every run gets.
  if (!a.device.empty()) s.settings.push_back({.key = "device", .values = {"\"" + a.device + "\""}});
  if (a.gpu_layers >= 0) s.settings.push_back({.key = "gpu_layers", .values = {std::to_string(a.gpu_layers)}});
  // --kv-type / --kv-memory: the topology's kv.type and kv.memory (checked
  // where the topology is read, like every key).
  if (!a.kv_type.empty()) s.settings.push_back({.key = "kv.type", .values = {"\"" + a.kv_type + "\""}});
  if (!a.kv_memory.empty()) s.settings.push_back({.key = "kv.memory", .values = {"\"" + a.kv_memory + "\""}});
  if (a.requests > 0) s.requests = a.requests;
  s.trace = s.trace || a.trace;
  if (a.no_warmup) s.warmup = false;
  if (!a.server.empty()) s.server = a.server;
  s.out_dir = a.out;
  if (!a.no_plot && !s.out_dir.empty()) s.plot_script = a.plot_script.empty() ? find_plot_script() : a.plot_script;
  const std::vector<RunSummary> runs = run_sweep(s, std::cerr);
  std::cout << markdown_table(runs);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Latency experiments: workloads over topologies, settings and loads");
  add_cpu_options(cmd, &args->cpu);
  cmd->add_option("--sweep", args->sweep, "A sweep file (configs/sweeps/*.json); the flags below override it");
  cmd->add_option("-m,--model", args->model, "GGUF file or HF directory (default: the default model)");
  cmd->add_option("-w,--workload", args->workload, "Workload file (configs/workloads/*.json)");
  cmd->add_option("-t,--topology", args->topologies, "Topology file (configs/*.json); repeat for several");
  cmd->add_option("--rates", args->rates, "Poisson request rates to run (req/s), comma-separated")->delimiter(',');
  cmd->add_option("--clients", args->clients, "Closed-loop client counts to run, comma-separated")->delimiter(',');
  cmd->add_option("--set", args->settings, "Vary a topology key: key=v1,v2 (e.g. scheduler.max_batch_size=8,32)");
  cmd->add_option("--device", args->device, "Where every stage runs: cpu, cuda or cuda:N");
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type of every run: f32, f16, bf16 or q8_0");
  cmd->add_option("--kv-memory", args->kv_memory, "Size every run's KV pool by bytes, e.g. 2GiB");
  cmd->add_option("--gpu-layers,-g", args->gpu_layers, "The last N layers on the GPU, the rest on the CPU")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--requests", args->requests, "Requests per run (default: the workload's)");
  cmd->add_flag("--trace", args->trace, "Trace every actor; writes trace_<run>.json (Perfetto) and per-actor tables");
  cmd->add_option("--server", args->server, "host:port of a running `troupe serve` to load instead of in-process");
  cmd->add_option("-o,--out", args->out, "Folder for results.csv, results.md, plots and traces");
  cmd->add_flag("--no-plot", args->no_plot, "Do not run tools/plot_bench.py");
  cmd->add_flag("--no-warmup", args->no_warmup, "Measure from the first request (default: one short warm-up request)");
  cmd->add_option("--plot-script", args->plot_script, "The plotting script (default: tools/plot_bench.py)");
  cmd->callback([args] { run(*args); });
}

}  // namespace troupe::cli
