// JSON -> PipelineConfig with nlohmann-json; strict about keys and types so a
// typo in a topology file fails loudly instead of running a default.
#include "actors/pipeline_config.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "actors/json_reader.hpp"
#include "core/error.hpp"
#include "grammar/tool_calls.hpp"

namespace troupe {
namespace {

using nlohmann::json;

using Reader = JsonReader;

void read_stages(const Reader& r, const json& arr, PipelineConfig& c) {
  if (!arr.is_array()) r.fail("stages", "must be an array");
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string where = "stages[" + std::to_string(i) + "]";
    const json& s = arr[i];
    r.only_keys(s, where, {"layers", "threads", "device", "remote"});
    StageSpec spec;
    const auto layers = s.find("layers");
    if (layers == s.end()) r.fail(where, "needs \"layers\": [first, last)");
    if (!layers->is_array() || layers->size() != 2 || !(*layers)[0].is_number_integer() ||
        !(*layers)[1].is_number_integer()) {
      r.fail(where + ".layers", "must be [first, last) as two integers (last -1: to the end)");
    }
    spec.first_layer = (*layers)[0].get<int64_t>();
    spec.last_layer = (*layers)[1].get<int64_t>();
    r.get(s, "threads", where, spec.threads);
    r.get(s, "device", where, spec.device);
    r.get(s, "remote", where, spec.remote);
    c.stages.push_back(spec);
  }
}

void read_scheduler(const Reader& r, const json& s, SchedulerConfig& c) {
  r.only_keys(s, "scheduler",
              {"max_batch_size", "max_tokens_per_step", "chunked_prefill", "prefill_chunk", "min_batch_size",
               "max_wait_ms", "max_waiting", "context_length", "kv_watermark", "level_bounds",
               "level_aging_ms", "kv_demand_fraction", "short_request_tokens", "short_kv_share",
               "short_batch_share", "max_preemptions", "speculative", "draft_tokens", "spec_token_cost",
               "draft_model", "draft_layers"});
  r.get(s, "max_batch_size", "scheduler", c.max_batch_size);
  r.get(s, "max_tokens_per_step", "scheduler", c.max_tokens_per_step);
  r.get(s, "chunked_prefill", "scheduler", c.chunked_prefill);
  r.get(s, "prefill_chunk", "scheduler", c.prefill_chunk);
  r.get(s, "min_batch_size", "scheduler", c.min_batch_size);
  r.get(s, "max_waiting", "scheduler", c.max_waiting);
  r.get(s, "context_length", "scheduler", c.context_length);
  r.get(s, "kv_watermark", "scheduler", c.kv_watermark);
  r.get(s, "kv_demand_fraction", "scheduler", c.kv_demand_fraction);
  r.get(s, "short_request_tokens", "scheduler", c.short_request_tokens);
  r.get(s, "short_kv_share", "scheduler", c.short_kv_share);
  r.get(s, "short_batch_share", "scheduler", c.short_batch_share);
  r.get(s, "max_preemptions", "scheduler", c.max_preemptions);
  r.get(s, "draft_tokens", "scheduler", c.spec_max_draft);
  r.get(s, "spec_token_cost", "scheduler", c.spec_token_cost);
  if (const auto sp = s.find("speculative"); sp != s.end()) {
    // "ngram" (prompt lookup), "draft" (draft_model), "self" (the first
    // draft_layers layers) or "off"; draft_tokens defaults to 4 with one.
    if (!sp->is_string() || (*sp != "ngram" && *sp != "draft" && *sp != "self" && *sp != "off")) {
      r.fail("scheduler.speculative", "must be \"ngram\", \"draft\", \"self\" or \"off\"");
    }
    if (*sp == "off") c.spec_max_draft = 0;
    if (*sp != "off" && c.spec_max_draft == 0) c.spec_max_draft = 4;
  }
  double wait_ms = static_cast<double>(c.max_wait.count()) / 1000.0;
  r.get(s, "max_wait_ms", "scheduler", wait_ms);
  // Checked before the cast: a double past int64 is undefined behaviour
  // (found by tests/fuzz/config_readers_fuzz.cpp).
  if (!(wait_ms >= 0.0 && wait_ms <= 1e9)) r.fail("scheduler.max_wait_ms", "must be a number of ms in [0, 1e9]");
  c.max_wait = std::chrono::microseconds(static_cast<int64_t>(wait_ms * 1000.0));
  double aging_ms = static_cast<double>(c.level_aging.count()) / 1000.0;
  r.get(s, "level_aging_ms", "scheduler", aging_ms);
  if (!(aging_ms >= 0.0 && aging_ms <= 1e9)) r.fail("scheduler.level_aging_ms", "must be a number of ms in [0, 1e9]");
  c.level_aging = std::chrono::microseconds(static_cast<int64_t>(aging_ms * 1000.0));
  if (const auto lb = s.find("level_bounds"); lb != s.end()) {
    if (!lb->is_array()) r.fail("scheduler.level_bounds", "must be an array of integers");
    c.level_bounds.clear();
    for (const json& v : *lb) {
      if (!v.is_number_integer()) r.fail("scheduler.level_bounds", "must be an array of integers");
      c.level_bounds.push_back(v.get<int32_t>());
    }
  }
}

}  // namespace

PipelineConfig parse_pipeline_config(std::string_view text, const std::string& origin) {
  const Reader r(origin);
  const json root = r.parse(text);
  // "server" belongs to the network edge (net/server_config), which reads
  // the same files; the pipeline leaves it alone. "replicas" is several
  // pipelines (actors/replica_config.hpp), which only `troupe serve` runs:
  // refused here rather than silently running the top-level chain alone.
  if (root.is_object() && root.contains("replicas")) {
    r.fail("replicas", "several replicas run only under `troupe serve` (read them with parse_replicas)");
  }
  r.only_keys(root, "",
              {"model",
               "stages",
               "device",
               "gpu_layers",
               "remote",
               "micro_batches",
               "tokenizers",
               "actor_threads",
               "kv",
               "scheduler",
               "trace",
               "anomaly",
               "server",
               "quantize",
               "lora",
               "tool_call_parser",
               "reasoning_format",
               "embedding",
               "pooling",
               "mmproj",
               "classifier_from_token",
               "rerank_template"});
  PipelineConfig c;
  r.get(root, "model", "", c.model_path);
  if (root.contains("quantize")) {
    std::string scheme;
    r.get(root, "quantize", "", scheme);
    try {
      c.load.quantize = parse_quant_scheme(scheme);
    } catch (const Error& e) {
      r.fail("quantize", e.what());
    }
  }
  // "lora": ["adapter", {"path": "adapter", "scale": 0.5}, ...]
  if (const auto it = root.find("lora"); it != root.end()) {
    if (!it->is_array()) r.fail("lora", "must be an array of adapter paths or {\"path\", \"scale\"} objects");
    for (size_t i = 0; i < it->size(); ++i) {
      const auto& item = (*it)[i];
      const std::string where = "lora[" + std::to_string(i) + "]";
      LoraAdapterSpec spec;
      if (item.is_string()) {
        spec.path = item.get<std::string>();
      } else if (item.is_object()) {
        r.only_keys(item, where, {"path", "scale"});
        r.get(item, "path", where, spec.path);
        double scale = 1.0;
        r.get(item, "scale", where, scale);
        spec.scale = static_cast<float>(scale);
      } else {
        r.fail(where, "must be a path or a {\"path\", \"scale\"} object");
      }
      if (spec.path.empty()) r.fail(where, "needs a path");
      c.load.lora.push_back(std::move(spec));
    }
  }
  if (const auto it = root.find("stages"); it != root.end()) read_stages(r, *it, c);
  r.get(root, "device", "", c.device);
  r.get(root, "gpu_layers", "", c.gpu_layers);
  if (const auto it = root.find("remote"); it != root.end()) {
    r.only_keys(*it, "remote", {"secret", "step_timeout_ms", "hello_timeout_ms", "tls_cert", "tls_key", "tls_ca"});
    r.get(*it, "secret", "remote", c.remote.secret);
    r.get(*it, "step_timeout_ms", "remote", c.remote.step_timeout_ms);
    r.get(*it, "hello_timeout_ms", "remote", c.remote.hello_timeout_ms);
    r.get(*it, "tls_cert", "remote", c.remote.tls_cert);
    r.get(*it, "tls_key", "remote", c.remote.tls_key);
    r.get(*it, "tls_ca", "remote", c.remote.tls_ca);
    if (c.remote.step_timeout_ms < 1) r.fail("remote.step_timeout_ms", "must be at least 1");
    if (c.remote.hello_timeout_ms < 1) r.fail("remote.hello_timeout_ms", "must be at least 1");
  }
  r.get(root, "micro_batches", "", c.micro_batches);
  r.get(root, "tool_call_parser", "", c.tool_call_parser);
  if (!c.tool_call_parser.empty() && !grammar::tool_call_syntax_named(c.tool_call_parser)) {
    r.fail("tool_call_parser", "must be one of hermes, llama3_json, mistral, json");
  }
  r.get(root, "reasoning_format", "", c.reasoning_format);
  if (!c.reasoning_format.empty() && c.reasoning_format != "auto" && c.reasoning_format != "deepseek" &&
      c.reasoning_format != "none") {
    r.fail("reasoning_format", "must be one of auto, deepseek, none");
  }
  if (root.contains("embedding")) {
    bool on = false;
    r.get(root, "embedding", "", on);
    c.embedding = on;
  }
  r.get(root, "pooling", "", c.pooling);
  r.get(root, "mmproj", "", c.mmproj);
  if (!c.pooling.empty() && c.pooling != "last" && c.pooling != "mean" && c.pooling != "cls") {
    r.fail("pooling", "must be last, mean or cls");
  }
  // A causal LM run as a reranker (ModelLoadOptions::classifier_from_token).
  if (const auto it = root.find("classifier_from_token"); it != root.end()) {
    if (!it->is_array() || it->empty() || it->size() > 2) r.fail("classifier_from_token", "must be one or two tokens");
    for (const json& t : *it) {
      if (!t.is_string() || t.get<std::string>().empty()) r.fail("classifier_from_token", "must hold token texts");
      c.load.classifier_from_token.push_back(t.get<std::string>());
    }
  }
  r.get(root, "rerank_template", "", c.load.rerank_template);
  if (!c.load.rerank_template.empty() && c.load.rerank_template.find("{document}") == std::string::npos) {
    r.fail("rerank_template", "must hold {document} (and usually {query})");
  }
  r.get(root, "tokenizers", "", c.tokenizer_pool);
  r.get(root, "actor_threads", "", c.actor_threads);
  if (const auto it = root.find("kv"); it != root.end()) {
    r.only_keys(*it, "kv", {"blocks", "block_size", "prefix_caching", "type", "memory"});
    r.get(*it, "blocks", "kv", c.n_kv_blocks);
    r.get(*it, "block_size", "kv", c.kv_block_size);
    r.get(*it, "prefix_caching", "kv", c.prefix_caching);
    std::string type = kv_type_name(c.kv_type);
    r.get(*it, "type", "kv", type);
    try {
      c.kv_type = parse_kv_type(type);
    } catch (const Error& e) {
      r.fail("kv.type", e.what());
    }
    // A byte budget: a number of bytes or a string with a unit ("2GiB").
    if (const auto mem = it->find("memory"); mem != it->end()) {
      if (it->contains("blocks")) r.fail("kv.memory", "and kv.blocks both size the pool: give one of them");
      if (mem->is_number_integer() && mem->get<int64_t>() > 0) {
        c.kv_memory_bytes = mem->get<int64_t>();
      } else if (mem->is_string()) {
        try {
          c.kv_memory_bytes = parse_byte_size(mem->get<std::string>());
        } catch (const Error& e) {
          r.fail("kv.memory", e.what());
        }
      } else {
        r.fail("kv.memory", "must be a positive number of bytes or a string such as \"2GiB\"");
      }
    }
  }
  if (const auto it = root.find("scheduler"); it != root.end()) {
    read_scheduler(r, *it, c.scheduler);
    r.get(*it, "draft_model", "scheduler", c.draft_model_path);
    r.get(*it, "draft_layers", "scheduler", c.draft_layers);
    const std::string method = it->contains("speculative") && (*it)["speculative"].is_string()
                                   ? (*it)["speculative"].get<std::string>()
                                   : std::string();
    if (method == "draft" && c.draft_model_path.empty()) {
      r.fail("scheduler.draft_model", "\"speculative\": \"draft\" needs the draft model's path");
    }
    if (method == "self" && c.draft_layers <= 0) {
      r.fail("scheduler.draft_layers", "\"speculative\": \"self\" needs the number of layers that draft");
    }
  }
  if (const auto it = root.find("trace"); it != root.end()) {
    r.only_keys(*it, "trace", {"enabled", "capacity"});
    r.get(*it, "enabled", "trace", c.trace.enabled);
    int64_t capacity = static_cast<int64_t>(c.trace.capacity);
    r.get(*it, "capacity", "trace", capacity);
    if (capacity < 1) r.fail("trace.capacity", "must be at least 1");
    c.trace.capacity = static_cast<size_t>(capacity);
  }
  if (const auto it = root.find("anomaly"); it != root.end()) {
    r.only_keys(*it, "anomaly", {"alpha", "threshold", "min_ratio", "warmup", "min_excess_ms"});
    r.get(*it, "alpha", "anomaly", c.anomaly.alpha);
    r.get(*it, "threshold", "anomaly", c.anomaly.threshold);
    r.get(*it, "min_ratio", "anomaly", c.anomaly.min_ratio);
    r.get(*it, "warmup", "anomaly", c.anomaly.warmup);
    double excess_ms = c.anomaly.min_excess_s * 1e3;
    r.get(*it, "min_excess_ms", "anomaly", excess_ms);
    c.anomaly.min_excess_s = excess_ms * 1e-3;
    if (!(c.anomaly.alpha > 0 && c.anomaly.alpha <= 1)) r.fail("anomaly.alpha", "must be in (0, 1]");
  }
  return c;
}

PipelineConfig load_pipeline_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path + ": cannot open the pipeline config");
  std::ostringstream text;
  text << in.rdbuf();
  PipelineConfig c = parse_pipeline_config(text.str(), path);
  std::vector<std::string*> paths{&c.model_path, &c.mmproj};
  for (LoraAdapterSpec& a : c.load.lora) paths.push_back(&a.path);
  for (std::string* p : paths) {
    if (!p->empty() && std::filesystem::path(*p).is_relative()) {
      *p = (std::filesystem::path(path).parent_path() / *p).lexically_normal().string();
    }
  }
  return c;
}

}  // namespace troupe
