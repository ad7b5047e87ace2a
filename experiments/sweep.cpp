// The sweep runner (see sweep.hpp): topology JSON with overrides ->
// PipelineConfig, a fresh pipeline per run so that counters, KV peak,
// anomalies and traces belong to that run alone; or, against a server,
// /metrics read before and after each run.
#include "experiments/sweep.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "actors/json_reader.hpp"
#include "actors/pipeline_config.hpp"
#include "core/error.hpp"
#include "experiments/inprocess_runner.hpp"
#include "experiments/load_client.hpp"
#include "model/model_tokenizer.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, std::string("cannot open the ") + what + " " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json parse_json(const std::string& text, const std::string& origin) { return JsonReader(origin).parse(text); }

struct Load {
  double rate = 0;
  int32_t clients = 0;
};

using Combo = std::vector<std::pair<std::string, std::string>>;  // key -> JSON literal

std::vector<Combo> combinations(const std::vector<SettingAxis>& axes) {
  std::vector<Combo> out{{}};
  for (const SettingAxis& a : axes) {
    if (a.values.empty()) throw Error(Errc::invalid_argument, "sweep setting " + a.key + " has no values");
    std::vector<Combo> next;
    for (const Combo& c : out) {
      for (const std::string& v : a.values) {
        Combo d = c;
        d.emplace_back(a.key, v);
        next.push_back(std::move(d));
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string combo_label(const Combo& c) {
  std::string out;
  for (const auto& [k, v] : c) out += (out.empty() ? "" : ";") + k + "=" + v;
  return out;
}

// Sets a dotted key ("scheduler.max_batch_size") in a topology document.
void set_key(json& doc, const std::string& key, const std::string& literal) {
  json* at = &doc;
  size_t start = 0;
  for (;;) {
    const size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw Error(Errc::invalid_argument, "sweep setting key '" + key + "' is malformed");
    if (!at->is_object()) throw Error(Errc::invalid_argument, "sweep setting " + key + ": not an object at " + part);
    if (dot == std::string::npos) {
      (*at)[part] = parse_json(literal, "sweep setting " + key);
      return;
    }
    at = &(*at)[part];
    if (at->is_null()) *at = json::object();
    start = dot + 1;
  }
}

PipelineConfig topology_config(const std::string& path, const Combo& combo) {
  json doc = path.empty() ? json::object() : parse_json(read_text(path, "topology"), path);
  for (const auto& [k, v] : combo) set_key(doc, k, v);
  return parse_pipeline_config(doc.dump(), path.empty() ? "default topology" : path);
}

std::string stem(const std::string& path) { return path.empty() ? "one_stage" : fs::path(path).stem().string(); }

std::string file_safe(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return s;
}

std::string load_label(const Load& l) {
  if (l.clients > 0) return std::to_string(l.clients) + "clients";
  if (l.rate > 0) {
    std::ostringstream s;
    s << l.rate << "rps";
    return s.str();
  }
  return "trace";
}

WorkloadSpec with_load(WorkloadSpec w, const Load& l, int32_t requests) {
  if (l.clients > 0) {
    w.arrival.kind = ArrivalSpec::Kind::concurrency;
    w.arrival.clients = l.clients;
  } else if (l.rate > 0) {
    w.arrival.kind = ArrivalSpec::Kind::poisson;
    w.arrival.rate = l.rate;
  }
  if (requests > 0) w.n_requests = requests;
  return w;
}

int32_t longest_output(const WorkloadSpec& w) {
  return w.output_tokens.kind == LengthDist::Kind::fixed ? static_cast<int32_t>(w.output_tokens.value)
                                                         : w.output_tokens.max;
}

struct Runner {
  const SweepSpec& spec;
  WorkloadSpec workload;
  std::shared_ptr<const Model> model;
  std::unique_ptr<Tokenizer> tokenizer;  // server runs plan with it
  std::string markdown_extra;            // per-run actor tables

  RunSummary in_process(const std::string& topology, const Combo& combo, const Load& load) {
    PipelineConfig config = topology_config(topology, combo);
    config.model = model;
    config.model_path.clear();
    if (spec.trace) config.trace.enabled = true;
    std::unique_ptr<Pipeline> p = Pipeline::start(config);
    const WorkloadSpec w = with_load(workload, load, spec.requests);
    int32_t ctx = config.scheduler.context_length;
    if (model->config().n_ctx_train > 0) ctx = std::min<int32_t>(ctx, static_cast<int32_t>(model->config().n_ctx_train));
    const std::vector<PlannedRequest> plan = plan_workload(w, p->tokenizer(), std::max(1, ctx - longest_output(w) - 1));
    if (spec.warmup) {
      GenerateParams params{.max_new_tokens = 4};
      params.sampling.temperature = 0;
      // Shorter than a KV block, so it leaves nothing in the prefix cache
      // that a measured request could hit.
      const std::vector<int32_t>& first = plan.front().prompt;
      std::future<Completion> f = p->generate(
          std::vector<int32_t>(first.begin(), first.begin() + std::min<ptrdiff_t>(8, std::ssize(first))), params);
      f.wait();
    }
    const PipelineStats before = p->stats();
    const std::vector<RequestRecord> records =
        run_in_process(*p, plan, {.clients = w.arrival.kind == ArrivalSpec::Kind::concurrency ? w.arrival.clients : 0,
                                  .ignore_eos = w.ignore_eos});
    RunSummary s = summarize_run(records);
    const PipelineStats after = p->stats();
    s.engine.preemptions = after.preemptions - before.preemptions;
    s.engine.kv_peak_blocks = after.kv_blocks_peak;
    s.engine.kv_total_blocks = after.kv_blocks_total;
    const uint64_t prompt = after.prompt_tokens - before.prompt_tokens;
    s.engine.prefix_hit_rate =
        prompt > 0 ? static_cast<double>(after.prefix_hit_tokens - before.prefix_hit_tokens) / static_cast<double>(prompt)
                   : 0.0;
    s.engine.anomalies = p->anomaly_counts();
    s.topology = stem(topology);
    s.setting = combo_label(combo);
    s.rate = w.arrival.kind == ArrivalSpec::Kind::poisson ? w.arrival.rate : 0;
    s.clients = w.arrival.kind == ArrivalSpec::Kind::concurrency ? w.arrival.clients : 0;
    if (p->tracing()) {
      const std::vector<TrackData> tracks = p->trace();
      const TraceSummary t = summarize_trace(tracks);
      s.engine.bottleneck = t.bottleneck;
      for (const ActorSummary& a : t.actors) {
        if (a.actor == t.bottleneck) s.engine.bottleneck_busy = a.busy_fraction;
      }
      const std::string label = file_safe(run_label(s, load));
      if (!spec.out_dir.empty()) {
        p->write_trace((fs::path(spec.out_dir) / ("trace_" + label + ".json")).string());
      }
      markdown_extra += "\n### " + run_label(s, load) + "\n\n" + format_trace_summary(t);
    }
    return s;
  }

  static std::string run_label(const RunSummary& s, const Load& load) {
    return s.topology + (s.setting.empty() ? "" : "_" + s.setting) + "_" + load_label(load);
  }

  // `run`: the run's position in the sweep. A server keeps its prefix cache
  // between runs, so each run draws its own prompts (seed + run); repeating
  // the previous run's prompts would measure cache hits, not the load.
  RunSummary against_server(const Load& load, int32_t run) {
    const size_t colon = spec.server.rfind(':');
    if (colon == std::string::npos) throw Error(Errc::invalid_argument, "--server wants host:port, got " + spec.server);
    LoadClientOptions opt{.host = spec.server.substr(0, colon),
                               .port = static_cast<uint16_t>(std::stoi(spec.server.substr(colon + 1)))};
    WorkloadSpec w = with_load(workload, load, spec.requests);
    w.seed += static_cast<uint64_t>(run);
    const std::vector<PlannedRequest> plan = plan_workload(w, *tokenizer, 4096);
    const std::map<std::string, double> before = scrape_metrics(opt);
    const int32_t clients = w.arrival.kind == ArrivalSpec::Kind::concurrency ? w.arrival.clients : 0;
    const std::vector<RequestRecord> records = run_against_server(plan, w.ignore_eos, clients, opt);
    const std::map<std::string, double> after = scrape_metrics(opt);
    auto delta = [&](const std::string& k) {
      const auto a = after.find(k);
      const auto b = before.find(k);
      return (a == after.end() ? 0.0 : a->second) - (b == before.end() ? 0.0 : b->second);
    };
    auto value = [&](const std::string& k) {
      const auto a = after.find(k);
      return a == after.end() ? 0.0 : a->second;
    };
    RunSummary s = summarize_run(records);
    s.topology = "server " + spec.server;
    s.rate = w.arrival.kind == ArrivalSpec::Kind::poisson ? w.arrival.rate : 0;
    s.clients = clients;
    s.engine.preemptions = static_cast<uint64_t>(delta("troupe_preemptions_total"));
    s.engine.kv_peak_blocks = static_cast<int32_t>(value("troupe_kv_blocks_peak"));
    s.engine.kv_total_blocks = static_cast<int32_t>(value("troupe_kv_blocks_total"));
    const double prompt = delta("troupe_prompt_tokens_total");
    s.engine.prefix_hit_rate = prompt > 0 ? delta("troupe_prefix_cache_hit_tokens_total") / prompt : 0.0;
    for (const char* m : {"ttft", "step_time"}) {
      const double n = delta(std::string("troupe_anomalies_total{metric=\"") + m + "\"}");
      if (n > 0) s.engine.anomalies[m] = static_cast<uint64_t>(n);
    }
    return s;
  }
};

}  // namespace

SweepSpec load_sweep(const std::string& path) {
  const json doc = parse_json(read_text(path, "sweep file"), path);
  if (!doc.is_object()) throw Error(Errc::bad_format, path + ": must be an object");
  const fs::path dir = fs::path(path).parent_path();
  auto rel = [&](const std::string& p) { return p.empty() || fs::path(p).is_absolute() ? p : (dir / p).lexically_normal().string(); };
  SweepSpec s;
  for (const auto& [key, v] : doc.items()) {
    auto fail = [&](const std::string& what) { throw Error(Errc::bad_format, path + ": " + key + ": " + what); };
    try {
      if (key == "model") {
        s.model_path = rel(v.get<std::string>());
      } else if (key == "workload") {
        s.workload_path = rel(v.get<std::string>());
      } else if (key == "topologies") {
        for (const auto& t : v) s.topologies.push_back(rel(t.get<std::string>()));
      } else if (key == "rates") {
        s.rates = v.get<std::vector<double>>();
      } else if (key == "clients") {
        s.clients = v.get<std::vector<int32_t>>();
      } else if (key == "settings") {
        if (!v.is_object()) fail("must map keys to arrays of values");
        for (const auto& [k, vals] : v.items()) {
          SettingAxis a{.key = k};
          if (!vals.is_array()) fail(k + " must be an array");
          for (const auto& x : vals) a.values.push_back(x.dump());
          s.settings.push_back(std::move(a));
        }
      } else if (key == "requests") {
        s.requests = v.get<int32_t>();
      } else if (key == "trace") {
        s.trace = v.get<bool>();
      } else if (key == "warmup") {
        s.warmup = v.get<bool>();
      } else if (key == "server") {
        s.server = v.get<std::string>();
      } else {
        fail("unknown key");
      }
    } catch (const json::exception& e) {
      fail(std::string("wrong type: ") + e.what());
    }
  }
  return s;
}

std::vector<RunSummary> run_sweep(const SweepSpec& spec, std::ostream& log) {
  if (spec.workload_path.empty()) throw Error(Errc::invalid_argument, "a sweep needs a workload file");
  Runner run{.spec = spec, .workload = load_workload(spec.workload_path)};
  if (spec.model_path.empty()) throw Error(Errc::invalid_argument, "a sweep needs the model (its vocabulary draws the prompts)");
  run.model = Model::load(spec.model_path);
  if (!spec.server.empty()) run.tokenizer = load_model_tokenizer(*run.model);

  std::vector<Load> loads;
  for (const double r : spec.rates) {
    if (!(r > 0)) throw Error(Errc::invalid_argument, "sweep rates must be positive");
    loads.push_back({.rate = r});
  }
  for (const int32_t c : spec.clients) {
    if (c < 1) throw Error(Errc::invalid_argument, "sweep client counts must be at least 1");
    loads.push_back({.clients = c});
  }
  if (loads.empty()) loads.push_back({});  // the workload's own arrival
  if (!spec.out_dir.empty()) fs::create_directories(spec.out_dir);

  std::vector<RunSummary> out;
  auto record = [&](RunSummary s) {
    log << "  " << s.topology << (s.setting.empty() ? "" : " [" + s.setting + "]") << ": " << s.ok << "/" << s.requests
        << " ok, " << s.output_tok_per_s << " out tok/s, TTFT P50 " << s.ttft.p50 * 1e3 << " ms P99 "
        << s.ttft.p99 * 1e3 << " ms, ITL P50 " << s.itl.p50 * 1e3 << " ms P99 " << s.itl.p99 * 1e3 << " ms"
        << (s.engine.bottleneck.empty() ? "" : ", bottleneck " + s.engine.bottleneck) << "\n";
    for (const std::string& e : s.errors) log << "    error: " << e << "\n";
    log.flush();
    out.push_back(std::move(s));
  };
  if (!spec.server.empty()) {
    for (size_t i = 0; i < loads.size(); ++i) {
      log << "server " << spec.server << ", " << load_label(loads[i]) << "\n";
      record(run.against_server(loads[i], static_cast<int32_t>(i)));
    }
  } else {
    const std::vector<std::string> topologies = spec.topologies.empty() ? std::vector<std::string>{""} : spec.topologies;
    for (const std::string& t : topologies) {
      for (const Combo& c : combinations(spec.settings)) {
        for (const Load& l : loads) {
          log << stem(t) << (c.empty() ? "" : " [" + combo_label(c) + "]") << ", " << load_label(l) << "\n";
          record(run.in_process(t, c, l));
        }
      }
    }
  }

  if (!spec.out_dir.empty()) {
    {
      // Closed (flushed) before the plotting script reads it.
      std::ofstream csv(fs::path(spec.out_dir) / "results.csv");
      csv << csv_header();
      for (const RunSummary& s : out) csv << csv_row(s);
      std::ofstream md(fs::path(spec.out_dir) / "results.md");
      md << "# " << run.workload.name << "\n\n" << markdown_table(out);
      if (!run.markdown_extra.empty()) md << "\n## Per-actor load (from the traces)\n" << run.markdown_extra;
      if (!csv || !md) throw Error(Errc::io, "cannot write the results into " + spec.out_dir);
    }
    if (!spec.plot_script.empty()) {
      const std::string cmd = "python3 '" + spec.plot_script + "' '" + (fs::path(spec.out_dir) / "results.csv").string() +
                              "' '" + spec.out_dir + "'";
      if (std::system(cmd.c_str()) != 0) log << "plotting failed (is matplotlib installed?): " << cmd << "\n";
    }
    log << "wrote " << spec.out_dir << "/results.csv, results.md\n";
  }
  return out;
}

}  // namespace troupe
