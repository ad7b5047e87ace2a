// GPU benchmarks of the CUDA backend through the model code (ModelStage),
// for random-weight BF16 Llama shapes built directly on the device (no
// weight files):
//  - single-stream decode tokens/s as a fraction of the HBM roofline (weight
//    bytes read per token / the copy bandwidth measured in the same run);
//  - prefill of 512- and 2048-token prompts: tokens/s and the TFLOP/s of the
//    layers' matmuls, against plain cuBLAS GEMMs of the very same shapes and
//    weights timed in the same run (the backend's GEMM configuration: bf16
//    inputs, fp32 accumulation, f32 output);
//  - aggregate decode tokens/s at batch 1..256 on the stage directly (the
//    actor pipeline's figures are bench_cuda_pipeline's).
//   bench_cuda [--models 1b,8b] [--out results.md] [--no-graphs]
//     (--no-graphs: every op launched one by one, to see what the graphs save)
//   --prefill-only / --decode-only: one half; --prefill-attention
//     scalar|tensor_cores: the prefill attention kernel (default: what
//     TROUPE_CUDA_PREFILL_ATTENTION says, else scalar). The GEMV/cuBLAS cut
//     follows TROUPE_CUDA_GEMV_MAX_TOKENS (kernels/cuda/matmul.cpp).
//   bench_cuda --prefill-profile N [--models 1b]: one N-token prefill after a
//     warm-up, alone inside cudaProfilerStart/Stop (for ncu, as below).
//   bench_cuda --decode-profile N [--models 1b]: only N single-stream decode
//     steps after a warm-up, inside cudaProfilerStart/Stop, for
//     `ncu --profile-from-start off` (scripts/gpu-check): which kernels a
//     decode step spends its time in, against the step's wall time.
// Without a usable GPU it prints "bench_cuda: no CUDA device: <reason>" and
// exits with 77 (the tests' skip code).
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda_backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"

namespace {

using troupe::CudaBackend;
using Clock = std::chrono::steady_clock;

struct Shape {
  std::string name;
  int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
  bool tied;
};

const Shape kLlama1B{"Llama-3.2-1B", 128256, 2048, 16, 32, 8, 64, 8192, true};
const Shape kLlama8B{"Llama-3-8B", 128256, 4096, 32, 32, 8, 128, 14336, false};

// A Llama whose weights are random BF16 values generated on the device.
class DeviceLlama final : public troupe::Model {
 public:
  DeviceLlama(CudaBackend& gpu, const Shape& s) {
    troupe::ModelConfig& c = config_;
    c.arch = "llama";
    c.name = s.name + " (random weights)";
    c.n_vocab = s.n_vocab;
    c.n_embd = s.n_embd;
    c.n_layer = s.n_layer;
    c.n_head = s.n_head;
    c.n_head_kv = s.n_head_kv;
    c.head_dim = s.head_dim;
    c.n_ff = s.n_ff;
    c.n_ctx_train = 8192;
    c.norm_eps = 1e-5f;
    c.rope_layout = troupe::kernels::RopeLayout::neox;
    c.n_rot = s.head_dim;
    c.rope_theta = 500000.0f;
    c.tied_output = s.tied;
    uint64_t seed = 1;
    auto mat = [&](int64_t n_in, int64_t n_out) {
      const troupe::Weight w = gpu.random_weight(troupe::DType::bf16, n_in, n_out, 0.02f, seed++);
      weight_bytes_ += n_in * n_out * 2;
      return w;
    };
    const float* ones = gpu.constant_vector(s.n_embd, 1.0f);
    weights_.tok_embd = gpu.random_weight(troupe::DType::bf16, s.n_embd, s.n_vocab, 1.0f, seed++);
    weights_.output = s.tied ? weights_.tok_embd : gpu.random_weight(troupe::DType::bf16, s.n_embd, s.n_vocab, 0.02f,
                                                                     seed++);
    weight_bytes_ += s.n_embd * s.n_vocab * 2;  // the output head is read every step
    weights_.output_norm = ones;
    weights_.layers.resize(static_cast<size_t>(s.n_layer));
    for (troupe::LayerWeights& l : weights_.layers) {
      l.attn_norm = ones;
      l.ffn_norm = ones;
      l.wq = mat(s.n_embd, s.n_head * s.head_dim);
      l.wk = mat(s.n_embd, s.n_head_kv * s.head_dim);
      l.wv = mat(s.n_embd, s.n_head_kv * s.head_dim);
      l.wo = mat(s.n_head * s.head_dim, s.n_embd);
      l.w_gate = mat(s.n_embd, s.n_ff);
      l.w_up = mat(s.n_embd, s.n_ff);
      l.w_down = mat(s.n_ff, s.n_embd);
    }
  }
};

// Device copy bandwidth in GB/s (bytes read + written), best of several runs.
double copy_bandwidth_gbs(CudaBackend& gpu) {
  const int64_t n = int64_t{1} << 28;  // 1 GiB of floats each way
  auto* src = static_cast<float*>(gpu.allocate(static_cast<size_t>(n) * 4));
  auto* dst = static_cast<float*>(gpu.allocate(static_cast<size_t>(n) * 4));
  cudaEvent_t a, b;
  TROUPE_CUDA_CHECK(cudaEventCreate(&a));
  TROUPE_CUDA_CHECK(cudaEventCreate(&b));
  double best = 0;
  for (int i = 0; i < 12; ++i) {
    TROUPE_CUDA_CHECK(cudaEventRecord(a, nullptr));
    troupe::cuda::copy_floats(dst, src, n, nullptr);
    TROUPE_CUDA_CHECK(cudaEventRecord(b, nullptr));
    TROUPE_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    TROUPE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) best = std::max(best, 2.0 * static_cast<double>(n) * 4 / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  gpu.deallocate(src);
  gpu.deallocate(dst);
  return best;
}

struct Runner {
  std::shared_ptr<const troupe::Model> model;
  std::unique_ptr<troupe::ModelStage> stage;
  std::vector<std::vector<int32_t>> tables;  // per sequence
  std::vector<float> logits;                 // [max_seqs, n_vocab], page-locked

  // Sequence 0 gets room for long_ctx tokens (the prefill runs), the others
  // for short_ctx (the batched decode runs): KV pages are f32.
  Runner(std::shared_ptr<const troupe::Model> m, CudaBackend& gpu, int64_t max_seqs, int64_t long_ctx,
         int64_t short_ctx)
      : model(std::move(m)) {
    const int64_t long_blocks = (long_ctx + 15) / 16, short_blocks = (short_ctx + 15) / 16;
    int32_t next = 0;
    for (int64_t s = 0; s < max_seqs; ++s) {
      std::vector<int32_t> t(static_cast<size_t>(s == 0 ? long_blocks : short_blocks));
      std::iota(t.begin(), t.end(), next);
      next += static_cast<int32_t>(t.size());
      tables.push_back(std::move(t));
    }
    stage = std::make_unique<troupe::ModelStage>(
        model, gpu,
        troupe::StageOptions{.max_tokens = 2048, .max_seqs = max_seqs, .n_kv_blocks = next, .kv_block_size = 16});
    logits.resize(static_cast<size_t>(max_seqs * model->config().n_vocab));
    // Logits land in pinned memory, as a sampler's buffer would.
    TROUPE_CUDA_CHECK(cudaHostRegister(logits.data(), logits.size() * sizeof(float), cudaHostRegisterDefault));
  }
  ~Runner() { cudaHostUnregister(logits.data()); }

  // One step: every sequence s in [0, batch) adds n_new tokens after n_past.
  double step(int64_t batch, int32_t n_new, int32_t n_past) {
    std::vector<troupe::BatchSeq> seqs;
    for (int64_t s = 0; s < batch; ++s) {
      seqs.push_back({.n_tokens = n_new, .n_past = n_past, .block_table = tables[static_cast<size_t>(s)],
                      .n_logits = 1});
    }
    std::vector<int32_t> tokens(static_cast<size_t>(batch * n_new));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919) % model->config().n_vocab);
    const auto t0 = Clock::now();
    stage->forward({.tokens = tokens, .seqs = seqs}, nullptr, logits.data());
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

std::string fmt(double v, int prec = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

// The layers' matmuls of one n-token prefill as plain cuBLAS GEMMs on the
// model's own weights: y[n, N] = x[n, K] · W[N, K]^T per weight, bf16 x and W,
// fp32 accumulation, f32 y (what the backend's GEMM path asks cuBLAS for).
// Best of 3 timed passes over every layer, after a warm-up.
class CublasBaseline {
 public:
  CublasBaseline(CudaBackend& gpu, const troupe::Model& model, int64_t max_tokens) : gpu_(gpu), model_(model) {
    const troupe::ModelConfig& c = model.config();
    const int64_t max_k = std::max(c.n_ff, c.n_embd), max_n = std::max({c.n_ff, c.n_embd, c.q_dim()});
    x_ = gpu.random_weight(troupe::DType::bf16, max_k, max_tokens, 1.0f, 99).data;
    y_ = gpu.allocate(static_cast<size_t>(max_tokens * max_n) * sizeof(float));
    ws_ = gpu.allocate(kWorkspace);
    TROUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TROUPE_CUBLAS_CHECK(cublasCreate(&handle_));
    TROUPE_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
    TROUPE_CUBLAS_CHECK(cublasSetWorkspace(handle_, ws_, kWorkspace));
    TROUPE_CUDA_CHECK(cudaEventCreate(&a_));
    TROUPE_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~CublasBaseline() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
    cublasDestroy(handle_);
    cudaStreamDestroy(stream_);
    gpu_.deallocate(y_);
    gpu_.deallocate(ws_);
  }
  CublasBaseline(const CublasBaseline&) = delete;
  CublasBaseline& operator=(const CublasBaseline&) = delete;

  double seconds(int64_t n_tokens) {
    pass(n_tokens);  // warm-up: cuBLAS picks and loads its kernels
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      TROUPE_CUDA_CHECK(cudaEventRecord(a_, stream_));
      pass(n_tokens);
      TROUPE_CUDA_CHECK(cudaEventRecord(b_, stream_));
      TROUPE_CUDA_CHECK(cudaEventSynchronize(b_));
      float ms = 0;
      TROUPE_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
      best = std::min(best, static_cast<double>(ms) * 1e-3);
    }
    return best;
  }

 private:
  static constexpr size_t kWorkspace = size_t{32} << 20;

  void pass(int64_t n_tokens) {
    for (const troupe::LayerWeights& l : model_.weights().layers) {
      for (const troupe::Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
        const float alpha = 1.0f, beta = 0.0f;
        const int n_out = static_cast<int>(w->n_out), n_in = static_cast<int>(w->n_in), m = static_cast<int>(n_tokens);
        TROUPE_CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n_out, m, n_in, &alpha, w->data,
                                         CUDA_R_16BF, n_in, x_, CUDA_R_16BF, n_in, &beta, y_, CUDA_R_32F, n_out,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    }
  }

  CudaBackend& gpu_;
  const troupe::Model& model_;
  const void* x_ = nullptr;  // [max_tokens, max_k] bf16, random
  void* y_ = nullptr;        // [max_tokens, max_n] f32
  void* ws_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

// FLOPs of the layers' matmuls for n tokens (2 per multiply-add; the output
// head, one row per prompt, is left out on both sides).
double layer_matmul_flops(const troupe::ModelConfig& c, int64_t n) {
  const double per_token = static_cast<double>(c.n_embd) * (2.0 * c.q_dim() + 2.0 * c.kv_dim() + 3.0 * c.n_ff);
  return 2.0 * static_cast<double>(n) * per_token * static_cast<double>(c.n_layer);
}

// FLOPs of causal attention over n tokens: QK^T and PV, n(n+1)/2 pairs each.
double attention_flops(const troupe::ModelConfig& c, int64_t n) {
  return 2.0 * 2.0 * static_cast<double>(c.n_head * c.head_dim) * static_cast<double>(n) * (n + 1) / 2.0 *
         static_cast<double>(c.n_layer);
}

// Prefill: one prompt of n tokens (a warm-up run first), against the same
// GEMMs in plain cuBLAS. TFLOP/s counts the layers' matmuls only, so the two
// columns share a numerator: their ratio is the share of the GEMM-only speed
// the whole prefill keeps (attention, norms, RoPE, the activation
// conversions and launch gaps are the rest).
void bench_prefill(CudaBackend& gpu, const troupe::Model& model, Runner& r, std::ostream& out) {
  const troupe::ModelConfig& c = model.config();
  out << "| prefill prompt | time (ms) | tokens/s | matmul TFLOP/s | cuBLAS same GEMMs (ms) | cuBLAS TFLOP/s "
         "| prefill / cuBLAS | attention share of FLOPs |\n|---|---|---|---|---|---|---|---|\n";
  CublasBaseline baseline(gpu, model, 2048);
  for (int32_t n : {512, 2048}) {
    r.step(1, n, 0);
    double best = 1e9;
    for (int i = 0; i < 3; ++i) best = std::min(best, r.step(1, n, 0));
    const double gemm = baseline.seconds(n);
    const double flops = layer_matmul_flops(c, n), attn = attention_flops(c, n);
    out << "| " << n << " | " << fmt(best * 1e3, 2) << " | " << fmt(n / best, 0) << " | "
        << fmt(flops / best / 1e12, 1) << " | " << fmt(gemm * 1e3, 2) << " | " << fmt(flops / gemm / 1e12, 1)
        << " | " << fmt(100.0 * gemm / best, 1) << "% | " << fmt(100.0 * attn / (attn + flops), 1) << "% |\n";
  }
}

struct Parts {
  bool prefill = true;
  bool decode = true;
};

void bench_model(CudaBackend& gpu, const Shape& shape, double bw_gbs, Parts parts, std::ostream& out) {
  auto model = std::make_shared<DeviceLlama>(gpu, shape);
  const double gb = static_cast<double>(model->weight_bytes()) / 1e9;
  out << "\n## " << shape.name << " shapes, random BF16 weights (" << fmt(gb, 2) << " GB read per decode step)\n\n";

  Runner r(model, gpu, 256, 2048 + 64, 256);

  if (parts.prefill) bench_prefill(gpu, *model, r, out);
  if (!parts.decode) return;

  // Single-stream decode after a 128-token prompt; the first steps capture
  // the CUDA graph, the timed ones replay it.
  r.step(1, 128, 0);
  for (int32_t i = 0; i < 4; ++i) r.step(1, 1, 128 + i);
  const int n_steps = 64;
  double total = 0;
  for (int32_t i = 0; i < n_steps; ++i) total += r.step(1, 1, 132 + i);
  const double tok_s = n_steps / total;
  const double roof = bw_gbs / gb;
  out << "\nSingle-stream decode: " << fmt(tok_s, 1) << " tok/s; roofline " << fmt(roof, 1) << " tok/s (" << fmt(gb, 2)
      << " GB / " << fmt(bw_gbs, 0) << " GB/s): **" << fmt(100.0 * tok_s / roof, 1) << "% of roofline**\n\n";

  // Aggregate decode on the stage directly: batch sequences at position 128
  // (their cache pages hold zeros: the timing does not depend on the values).
  out << "| decode batch (ModelStage directly) | step (ms) | aggregate tokens/s |\n|---|---|---|\n";
  for (int64_t batch : {1, 2, 4, 8, 32, 128, 256}) {
    for (int32_t i = 0; i < 3; ++i) r.step(batch, 1, 128 + i);
    const int steps = 16;
    double t = 0;
    for (int32_t i = 0; i < steps; ++i) t += r.step(batch, 1, 131 + i);
    out << "| " << batch << " | " << fmt(t / steps * 1e3, 2) << " | " << fmt(batch * steps / t, 0) << " |\n";
  }
  const troupe::CudaBackendStats st = gpu.stats();
  out << "\n(CUDA graphs so far: " << st.graph_captures << " captured, " << st.graph_replays << " replays; "
      << st.fused_ops << " fused op pairs)\n";
}

// N single-stream decode steps after a 128-token prompt and a warm-up (the
// graph captured), the only ones inside the profiler's range; prints their
// mean wall time, which the profiled kernels' sum is set against.
void profile_decode(CudaBackend& gpu, const Shape& shape, int n_steps) {
  auto model = std::make_shared<DeviceLlama>(gpu, shape);
  Runner r(model, gpu, 1, 256, 16);
  r.step(1, 128, 0);
  for (int32_t i = 0; i < 8; ++i) r.step(1, 1, 128 + i);
  double total = 0;
  TROUPE_CUDA_CHECK(cudaProfilerStart());
  for (int32_t i = 0; i < n_steps; ++i) total += r.step(1, 1, 136 + i);
  TROUPE_CUDA_CHECK(cudaProfilerStop());
  std::printf("%s: %d profiled decode steps, %.3f ms wall per step (%.2f GB of weights)\n", shape.name.c_str(), n_steps,
              total / n_steps * 1e3, static_cast<double>(model->weight_bytes()) / 1e9);
}

// One prefill of n tokens after a warm-up one, alone inside the profiler's
// range: where a prefill's time goes besides the GEMMs.
void profile_prefill(CudaBackend& gpu, const Shape& shape, int32_t n) {
  auto model = std::make_shared<DeviceLlama>(gpu, shape);
  Runner r(model, gpu, 1, n + 64, 16);
  r.step(1, n, 0);
  TROUPE_CUDA_CHECK(cudaProfilerStart());
  const double t = r.step(1, n, 0);
  TROUPE_CUDA_CHECK(cudaProfilerStop());
  std::printf("%s: one profiled prefill of %d tokens, %.3f ms wall\n", shape.name.c_str(), n, t * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models{"1b", "8b"};
  std::string out_path;
  int profile_steps = 0;
  int profile_prefill_tokens = 0;
  Parts parts;
  troupe::CudaBackendOptions options;  // default: CUDA graphs on
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--models" && i + 1 < argc) {
      models.clear();
      std::stringstream ss(argv[++i]);
      for (std::string m; std::getline(ss, m, ',');) models.push_back(m);
    } else if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--no-graphs") {
      options.cuda_graphs = false;
    } else if (a == "--decode-profile" && i + 1 < argc) {
      profile_steps = std::atoi(argv[++i]);
    } else if (a == "--prefill-profile" && i + 1 < argc) {
      profile_prefill_tokens = std::atoi(argv[++i]);
    } else if (a == "--prefill-only") {
      parts.decode = false;
    } else if (a == "--decode-only") {
      parts.prefill = false;
    } else if (a == "--prefill-attention" && i + 1 < argc && std::string_view(argv[i + 1]) == "scalar") {
      options.prefill_attention = troupe::PrefillAttention::scalar;
      ++i;
    } else if (a == "--prefill-attention" && i + 1 < argc && std::string_view(argv[i + 1]) == "tensor_cores") {
      options.prefill_attention = troupe::PrefillAttention::tensor_cores;
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: bench_cuda [--models 1b,8b] [--out results.md] [--no-graphs] [--decode-profile N]\n"
                   "                  [--prefill-only | --decode-only] [--prefill-attention scalar|tensor_cores]\n"
                   "                  [--prefill-profile N]\n");
      return 2;
    }
  }
  std::string why;
  if (!troupe::cuda_available(&why)) {
    const std::string prefix = "no usable CUDA device: ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    std::fprintf(stderr, "bench_cuda: no CUDA device: %s\n", why.c_str());
    return 77;
  }
  try {
    for (const std::string& m : models) {
      if (m != "1b" && m != "8b") throw troupe::Error(troupe::Errc::invalid_argument, "unknown model shape " + m);
    }
    if (profile_steps < 0 || profile_steps > 100) {
      throw troupe::Error(troupe::Errc::invalid_argument, "--decode-profile takes 1 to 100 steps");
    }
    if (profile_prefill_tokens < 0 || profile_prefill_tokens > 2048) {
      throw troupe::Error(troupe::Errc::invalid_argument, "--prefill-profile takes 1 to 2048 tokens");
    }
    if (profile_prefill_tokens > 0) {
      for (const std::string& m : models) {
        CudaBackend gpu(options);
        profile_prefill(gpu, m == "1b" ? kLlama1B : kLlama8B, profile_prefill_tokens);
      }
      return 0;
    }
    if (profile_steps > 0) {
      for (const std::string& m : models) {
        CudaBackend gpu(options);
        profile_decode(gpu, m == "1b" ? kLlama1B : kLlama8B, profile_steps);
      }
      return 0;
    }
    if (!out_path.empty()) std::ofstream(out_path, std::ios::trunc) << "";
    for (const std::string& m : models) {
      std::stringstream out;
      CudaBackend gpu(options);
      const double bw = copy_bandwidth_gbs(gpu);
      out << "# CUDA backend on " << gpu.device_name() << ": " << (m == "1b" ? kLlama1B.name : kLlama8B.name)
          << (options.cuda_graphs ? "" : " (CUDA graphs off)")
          << (gpu.tensor_core_prefill() ? ", prefill attention on tensor cores" : ", prefill attention scalar fp32")
          << "\n\nHBM copy bandwidth (copy kernel, bytes read + written): " << fmt(bw, 0) << " GB/s\n";
      bench_model(gpu, m == "1b" ? kLlama1B : kLlama8B, bw, parts, out);
      std::fputs(out.str().c_str(), stdout);
      std::fflush(stdout);
      if (!out_path.empty()) std::ofstream(out_path, std::ios::app) << out.str() << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
