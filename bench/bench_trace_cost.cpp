// What tracing costs: the same closed-loop workload through the same
// topology with tracing off and on, alternated over several rounds (so
// drift in machine load hits both alike), as output tokens/s of each and
// their ratio. Prints a Markdown table.
//   bench_trace_cost [--rounds 4] [--requests 32] model.gguf topology.json workload.json
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "actors/pipeline_config.hpp"
#include "experiments/inprocess_runner.hpp"
#include "experiments/run_summary.hpp"

namespace {

struct Args {
  int rounds = 4;
  int requests = 32;
  std::string model, topology, workload;
};

struct Result {
  double tok_s = 0;
  uint64_t spans = 0;
};

Result run_once(const std::shared_ptr<const troupe::Model>& model, const Args& a, bool trace) {
  troupe::PipelineConfig config = troupe::load_pipeline_config(a.topology);
  config.model = model;
  config.model_path.clear();
  config.trace.enabled = trace;
  std::unique_ptr<troupe::Pipeline> p = troupe::Pipeline::start(config);
  troupe::WorkloadSpec w = troupe::load_workload(a.workload);
  w.n_requests = a.requests;
  const std::vector<troupe::PlannedRequest> plan = troupe::plan_workload(w, p->tokenizer(), 1024);
  const int32_t clients = w.arrival.kind == troupe::ArrivalSpec::Kind::concurrency ? w.arrival.clients : 8;
  const troupe::RunSummary s =
      troupe::summarize_run(troupe::run_in_process(*p, plan, {.clients = clients, .ignore_eos = true}));
  Result r{.tok_s = s.output_tok_per_s};
  for (const troupe::TrackData& t : p->trace()) r.spans += t.spans.size();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      a.rounds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--requests") && i + 1 < argc) {
      a.requests = std::atoi(argv[++i]);
    } else {
      pos.push_back(argv[i]);
    }
  }
  if (pos.size() != 3) {
    std::fprintf(stderr, "usage: bench_trace_cost [--rounds 4] [--requests 32] model.gguf topology.json workload.json\n");
    return 2;
  }
  a.model = pos[0];
  a.topology = pos[1];
  a.workload = pos[2];
  try {
    const std::shared_ptr<const troupe::Model> model = troupe::Model::load(a.model);
    run_once(model, a, false);  // warm the page cache and the CPU
    std::vector<double> off, on;
    uint64_t spans = 0;
    for (int r = 0; r < a.rounds; ++r) {
      // Alternate which goes first, so neither always runs on a warmer machine.
      const bool on_first = r % 2 == 1;
      for (int k = 0; k < 2; ++k) {
        const bool trace = (k == 0) == on_first;
        const Result res = run_once(model, a, trace);
        (trace ? on : off).push_back(res.tok_s);
        if (trace) spans = std::max(spans, res.spans);
        std::fprintf(stderr, "round %d, tracing %s: %.1f tok/s\n", r, trace ? "on" : "off", res.tok_s);
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    const double m_off = median(off), m_on = median(on);
    std::printf("| tracing | output tok/s (median of %d) | ratio |\n|---|---|---|\n", a.rounds);
    std::printf("| off | %.1f | 1.000 |\n| on | %.1f | %.3f |\n", m_off, m_on, m_on / m_off);
    std::printf("\nspans recorded in one traced run: %llu\n", static_cast<unsigned long long>(spans));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_trace_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
