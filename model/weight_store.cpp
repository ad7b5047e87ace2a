// WeightStore and the whole-model weight passes: quantization at load and
// the decode-step byte count.
#include "model/weight_store.hpp"

#include <cstring>
#include <map>
#include <new>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/model.hpp"
#include "model/quant_scheme.hpp"

namespace troupe {
namespace {
constexpr std::align_val_t kAlign{64};
}  // namespace

void WeightStore::Free::operator()(void* p) const noexcept { ::operator delete(p, kAlign); }

void* WeightStore::allocate(size_t bytes) {
  void* p = ::operator new(bytes == 0 ? 1 : bytes, kAlign);
  blocks_.emplace_back(p);
  bytes_ += bytes;
  return p;
}

void* WeightStore::allocate_transient(size_t bytes) {
  void* p = ::operator new(bytes == 0 ? 1 : bytes, kAlign);
  transient_.emplace(reinterpret_cast<uintptr_t>(p), Transient{.block = std::unique_ptr<void, Free>(p), .bytes = bytes});
  bytes_ += bytes;
  return p;
}

const void* WeightStore::transient_block(const void* p) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = transient_.upper_bound(at);
  if (it == transient_.begin()) return nullptr;
  --it;
  return at < it->first + it->second.bytes ? reinterpret_cast<const void*>(it->first) : nullptr;
}

void WeightStore::release(const void* block) {
  auto it = transient_.find(reinterpret_cast<uintptr_t>(block));
  if (it == transient_.end()) throw Error(Errc::internal, "WeightStore::release: not a transient block");
  bytes_ -= it->second.bytes;
  transient_.erase(it);
}

const float* store_f32(WeightStore& store, DType t, const void* src, int64_t n) {
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16) {
    throw Error(Errc::unsupported, "store_f32: " + std::string(dtype_name(t)) + " is not a float type");
  }
  float* dst = store.floats(n);
  if (t == DType::f32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return dst;
  }
  // Halves are copied to aligned storage first: src may sit at an odd address.
  std::vector<uint16_t> halves(static_cast<size_t>(n));
  std::memcpy(halves.data(), src, halves.size() * sizeof(uint16_t));
  dequantize_row(t, halves.data(), dst, n);
  return dst;
}

Weight gather_rows(WeightStore& store, const Weight& w, const std::vector<RowRun>& runs) {
  if (w.lora != nullptr) {
    throw Error(Errc::unsupported,
                "a LoRA update of a matrix whose rows are regathered at load (Qwen3-Next's "
                "q_proj) is not supported");
  }
  const int64_t row = row_bytes(w.type, w.n_in);
  int64_t n_out = 0;
  for (const RowRun& r : runs) {
    if (r.first < 0 || r.count < 0 || r.first + r.count > w.n_out) {
      throw Error(Errc::internal, "gather_rows: rows [" + std::to_string(r.first) + ", " +
                                      std::to_string(r.first + r.count) + ") outside a matrix of " +
                                      std::to_string(w.n_out));
    }
    n_out += r.count;
  }
  auto* dst = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(n_out * row)));
  const auto* src = static_cast<const uint8_t*>(w.data);
  int64_t at = 0;
  for (const RowRun& r : runs) {
    std::memcpy(dst + at * row, src + r.first * row, static_cast<size_t>(r.count * row));
    at += r.count;
  }
  return Weight{.data = dst, .type = w.type, .n_in = w.n_in, .n_out = n_out};
}

void for_each_matrix(ModelWeights& w, const std::function<void(const std::string&, Weight&, bool)>& fn) {
  const bool tied = w.output.data != nullptr && w.output.data == w.tok_embd.data;
  if (w.tok_embd.data != nullptr) fn("token_embd", w.tok_embd, true);
  if (w.pos_embd.data != nullptr) fn("position_embd", w.pos_embd, false);
  if (w.output.data != nullptr && !tied) fn("output", w.output, true);
  for (size_t il = 0; il < w.layers.size(); ++il) {
    LayerWeights& l = w.layers[il];
    const std::string b = "blk." + std::to_string(il) + ".";
    const std::pair<const char*, Weight*> dense[] = {{"attn_q", &l.wq},        {"attn_q_a", &l.wq_a},
                                                     {"attn_kv_a_mqa", &l.wkv_a}, {"attn_kv_b", &l.wkv_b},
                                                     {"attn_k", &l.wk},
                                                     {"attn_v", &l.wv},        {"attn_output", &l.wo},
                                                     {"shortconv.in_proj", &l.conv_in},
                                                     {"attn_q_gate", &l.wq_gate}, {"attn_qkv", &l.gdn_qkv},
                                                     {"attn_gate", &l.gdn_z}, {"ssm_in", &l.ssm_in},
                                                     {"ffn_gate", &l.w_gate},  {"ffn_up", &l.w_up},
                                                     {"ffn_down", &l.w_down}};
    for (const auto& [name, m] : dense) {
      if (m->data != nullptr) fn(b + name, *m, true);
    }
    if (l.ffn_router.data != nullptr) fn(b + "ffn_gate_inp", l.ffn_router, false);
    // beta's and the decay's rows: a few per layer, kept exact.
    if (l.gdn_b.data != nullptr) fn(b + "ssm_beta", l.gdn_b, false);
    if (l.gdn_a.data != nullptr) fn(b + "ssm_alpha", l.gdn_a, false);
    for (size_t e = 0; e < l.experts.size(); ++e) {
      const std::string x = ".expert." + std::to_string(e);
      fn(b + "ffn_gate" + x, l.experts[e].w_gate, true);
      fn(b + "ffn_up" + x, l.experts[e].w_up, true);
      fn(b + "ffn_down" + x, l.experts[e].w_down, true);
    }
    if (l.shared.w_gate.data != nullptr) {
      fn(b + "ffn_gate_shexp", l.shared.w_gate, true);
      fn(b + "ffn_up_shexp", l.shared.w_up, true);
      fn(b + "ffn_down_shexp", l.shared.w_down, true);
      fn(b + "ffn_gate_inp_shexp", l.shared_gate, false);
    }
  }
  if (tied) w.output = w.tok_embd;  // follows a converted embedding
}

void quantize_weights(ModelWeights& w, const ModelConfig& c, const QuantScheme& scheme, WeightStore& store,
                      const std::string& model_path) {
  const QuantShape shape = quant_shape(c);
  // How many matrices live in each transient block (slices of one fused
  // matrix share it): a block goes once all of them are converted.
  std::map<const void*, int64_t> users;
  for_each_matrix(w, [&](const std::string&, Weight& m, bool) {
    if (const void* b = store.transient_block(m.data)) ++users[b];
  });
  // The rows of each matrix split over every hardware thread: the k-quant
  // quantizers make this most of a mixed load's time.
  ThreadPool pool;
  for_each_matrix(w, [&](const std::string& label, Weight& m, bool quantizable) {
    if (!quantizable || is_quantized(m.type)) return;  // quantized GGUF tensors stay as they are
    const DType to = scheme_type(scheme, label, m.n_in, shape);
    if (m.type == to) return;
    const int64_t block = dtype_info(to).block_size;
    if (m.n_in % block != 0) {
      throw Error(Errc::unsupported, model_path + ": cannot quantize '" + label + "' to " +
                                         std::string(dtype_name(to)) + ": its row length " + std::to_string(m.n_in) +
                                         " is not a multiple of " + std::to_string(block));
    }
    const int64_t src_row = row_bytes(m.type, m.n_in), dst_row = row_bytes(to, m.n_in);
    const auto* src = static_cast<const uint8_t*>(m.data);
    auto* dst = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(dst_row * m.n_out)));
    pool.parallel_for(m.n_out, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(m.n_in));
      for (int64_t r = r0; r < r1; ++r) {
        dequantize_row(m.type, src + r * src_row, row.data(), m.n_in);
        quantize_row(to, row.data(), dst + r * dst_row, m.n_in);
      }
    });
    const void* source = store.transient_block(m.data);
    m = Weight{.data = dst, .type = to, .n_in = m.n_in, .n_out = m.n_out, .lora = m.lora, .lora_row0 = m.lora_row0};
    if (source != nullptr && --users[source] == 0) store.release(source);
  });
}

int64_t decode_weight_bytes(const ModelWeights& w, const ModelConfig& c) {
  auto bytes = [](const Weight& m) { return m.data == nullptr ? 0 : row_bytes(m.type, m.n_in) * m.n_out; };
  const bool tied = w.output.data == w.tok_embd.data;
  int64_t total = tied ? bytes(w.tok_embd) : bytes(w.output);
  for (const LayerWeights& l : w.layers) {
    for (const Weight* m : {&l.wq, &l.wq_a, &l.wkv_a, &l.wkv_b, &l.wk, &l.wv, &l.wo, &l.conv_in, &l.wq_gate,
                            &l.gdn_qkv, &l.gdn_z, &l.gdn_b, &l.gdn_a, &l.ssm_in, &l.w_gate, &l.w_up, &l.w_down,
                            &l.ffn_router, &l.shared.w_gate, &l.shared.w_up, &l.shared.w_down, &l.shared_gate}) {
      total += bytes(*m);
    }
    int64_t experts = 0;
    for (const ExpertWeights& e : l.experts) experts += bytes(e.w_gate) + bytes(e.w_up) + bytes(e.w_down);
    if (!l.experts.empty()) total += experts * c.n_expert_used / static_cast<int64_t>(l.experts.size());
  }
  return total;
}

}  // namespace troupe
