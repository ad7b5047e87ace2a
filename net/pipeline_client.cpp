// Background loading with progress: the model's files are first read once
// in large chunks (the progress figure, and it leaves them in the page
// cache so the mmap-based Model::load that follows is quick), then the
// model is loaded and the pipeline started.
#include "net/pipeline_client.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "model/model_identity.hpp"

namespace troupe::net {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> model_files(const std::string& path) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.is_regular_file(ec)) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.emplace_back(path);
  }
  return files;
}

}  // namespace

std::string model_id_from_path(const std::string& path) {
  fs::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  std::error_code ec;
  if (fs::is_directory(p, ec)) return p.filename().string();
  std::string stem = p.filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  return stem;
}

PipelineClient::PipelineClient(PipelineClientOptions options) : options_(std::move(options)) {
  state_.stage = "starting";
  loader_ = std::thread([this] { load(); });
}

PipelineClient::~PipelineClient() {
  stop_ = true;
  if (loader_.joinable()) loader_.join();
  pipeline_.reset();  // cancels what still runs, waits for the actors
}

void PipelineClient::set_state(LoadState s) {
  {
    std::lock_guard lock(mutex_);
    state_ = s;
  }
  cv_.notify_all();
  if (options_.on_progress) options_.on_progress(s);
}

void PipelineClient::load() {
  const std::string& path = options_.pipeline.model_path;
  try {
    if (!options_.pipeline.model) {
      // Reading: 0 .. 0.8 of the progress.
      const std::vector<fs::path> files = model_files(path);
      uint64_t total = 0, done = 0;
      for (const fs::path& f : files) {
        std::error_code ec;
        const auto size = fs::file_size(f, ec);
        if (!ec) total += size;
      }
      std::vector<char> buf(16 << 20);
      double last_reported = -1;
      for (const fs::path& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) throw Error(Errc::io, f.string() + ": cannot open the model file");
        while (in && !stop_) {
          in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
          done += static_cast<uint64_t>(in.gcount());
          const double p = total > 0 ? 0.8 * static_cast<double>(done) / static_cast<double>(total) : 0.8;
          if (p - last_reported >= 0.05 || done == total) {
            last_reported = p;
            set_state({.progress = p, .stage = "reading " + f.filename().string()});
          }
        }
      }
      if (stop_) return;
      set_state({.progress = 0.8, .stage = "loading the model"});
      options_.pipeline.model = Model::load(path, pipeline_load_options(options_.pipeline));
    }
    if (stop_) return;
    set_state({.progress = 0.9, .stage = "starting the pipeline"});
    if (!options_.pipeline.on_anomaly) {
      // The server's log: one line per excursion, with the requests in it.
      options_.pipeline.on_anomaly = [](const AnomalyEvent& e) {
        std::fprintf(stderr, "troupe serve: %s\n", describe(e).c_str());
      };
    }
    const PipelineConfig& cfg = options_.pipeline;
    std::unique_ptr<Pipeline> p = Pipeline::start(cfg);

    const Model& model = p->model();
    info_.id = options_.model_id.empty() ? model_id_from_path(path.empty() ? model.path() : path) : options_.model_id;
    info_.created = static_cast<int64_t>(std::time(nullptr));
    info_.engine = p->model_info();
    info_.architecture = model.config().arch;
    info_.digest = model_identity(model);
    info_.lora = options_.pipeline.load.lora;
    const fs::path file(model.path());
    info_.format = fs::is_directory(file) ? "safetensors" : file.extension() == ".gguf" ? "gguf" : "llama2.c";
    pools_.weight_bytes = model.weight_bytes();
    // Every stage's pages, as the stages size them (their KV element type).
    pools_.kv_bytes = info_.engine.kv_bytes_per_token * info_.engine.n_kv_blocks * info_.engine.kv_block_size;
    pools_.kv_block_size = info_.engine.kv_block_size;
    pools_.kv_token_bytes = info_.engine.kv_bytes_per_token;
    pools_.kv_type = kv_type_name(cfg.kv_type);
    pipeline_ = std::move(p);
    ready_.store(true, std::memory_order_release);
    set_state({.ready = true, .loaded = true, .progress = 1.0, .stage = "ready"});
  } catch (const std::exception& e) {
    set_state({.failed = true, .progress = 0, .stage = e.what()});
  }
}

bool PipelineClient::wait_loaded() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return state_.ready || state_.failed; });
  return state_.ready;
}

LoadState PipelineClient::load_state() const {
  LoadState s;
  {
    std::lock_guard lock(mutex_);
    s = state_;
  }
  if (!s.loaded) return s;
  // An actor that stopped takes the server out of readiness for good (every
  // request it held has ended with an error).
  if (std::string failure = pipeline_->failure(); !failure.empty()) {
    s.ready = false;
    s.stage = std::move(failure);
    return s;
  }
  // A stage that failed (a GPU error) or is down (a remote worker lost)
  // takes the server out of readiness until it is back.
  s.stages = pipeline_->stage_health();
  for (const StageHealth& h : s.stages) {
    if (h.up) continue;
    s.ready = false;
    s.stage = h.name + " (layers " + std::to_string(h.first_layer) + "-" + std::to_string(h.last_layer - 1) + " on " +
              h.where + ") is down: " + h.error;
    break;
  }
  return s;
}

ServedModel PipelineClient::served_model() const {
  if (!ready_.load(std::memory_order_acquire)) throw Error(Errc::internal, "the model is not loaded yet");
  return info_;
}

MemoryPools PipelineClient::memory_pools() const {
  if (!ready_.load(std::memory_order_acquire)) return {};
  return pools_;
}

RequestId PipelineClient::submit(EngineRequest request, RequestCallbacks callbacks) {
  if (!ready_.load(std::memory_order_acquire)) throw Error(Errc::internal, "the model is not loaded yet");
  return pipeline_->submit(std::move(request), std::move(callbacks));
}

void PipelineClient::tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done) {
  if (!ready_.load(std::memory_order_acquire)) throw Error(Errc::unavailable, "the model is not loaded yet");
  pipeline_->tokenize(std::move(request), detokenize, std::move(done));
}

void PipelineClient::cancel(RequestId id) {
  if (ready_.load(std::memory_order_acquire)) pipeline_->cancel(id);
}

std::map<std::string, uint64_t> PipelineClient::anomaly_counts() const {
  if (!ready_.load(std::memory_order_acquire)) return {};
  return pipeline_->anomaly_counts();
}

std::vector<ActorSummary> PipelineClient::actor_summary() const {
  if (!ready_.load(std::memory_order_acquire) || !pipeline_->tracing()) return {};
  return pipeline_->trace_summary().actors;
}

std::vector<ActorLoad> PipelineClient::actor_loads() const {
  if (!ready_.load(std::memory_order_acquire)) return {};
  return pipeline_->actor_loads();
}

PipelineStats PipelineClient::stats() const {
  if (!ready_.load(std::memory_order_acquire)) throw Error(Errc::internal, "the model is not loaded yet");
  return pipeline_->stats();
}

}  // namespace troupe::net
