#include "model/lora.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model/gguf.hpp"
#include "model/hf_config.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "model/weight_store.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;

// A and B of one updated tensor as the adapter file stores them, before
// they are paired.
template <class T>
struct Pair {
  const T* a = nullptr;  // [rank, n_in]
  const T* b = nullptr;  // [n_out, rank]
};

// A tensor's n values (f32, f16, bf16 at any address, as safetensors keeps
// them; or a GGUF's quantized blocks, aligned) as f32.
std::vector<float> to_f32(DType type, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const int64_t bytes = row_bytes(type, n);
  if (type == DType::f32) {
    std::memcpy(out.data(), src, static_cast<size_t>(bytes));
  } else {
    std::vector<uint8_t> aligned(static_cast<size_t>(bytes));
    std::memcpy(aligned.data(), src, aligned.size());
    dequantize_row(type, aligned.data(), out.data(), n);
  }
  return out;
}

// The update of A [rank, n_in] and B [n_out, rank] (of `type`, at any
// address) times `scale`, in the store as f32: A as it is, B transposed.
LoraDelta* new_delta(WeightStore& store, DType type_a, const void* a, DType type_b, const void* b, int64_t rank,
                     int64_t n_in, int64_t n_out, float scale, const std::string& source) {
  if (rank > kMaxLoraRank) {
    throw Error(Errc::unsupported, source + ": rank " + std::to_string(rank) + " is more than the " +
                                       std::to_string(kMaxLoraRank) + " Troupe runs");
  }
  const std::vector<float> a32 = to_f32(type_a, a, rank * n_in), b32 = to_f32(type_b, b, n_out * rank);
  float* ad = store.floats(rank * n_in);
  std::memcpy(ad, a32.data(), a32.size() * sizeof(float));
  float* bt = store.floats(rank * n_out);
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t k = 0; k < rank; ++k) bt[k * n_out + o] = scale * b32[static_cast<size_t>(o * rank + k)];
  }
  return new (store.allocate(sizeof(LoraDelta)))
      LoraDelta{.a = ad, .bt = bt, .rank = rank, .rows = n_out, .next = nullptr};
}

// "base_model.model.<module>.lora_A.weight": PEFT's names, the adapter's
// own name already dropped by save_pretrained.
constexpr std::string_view kPeftPrefix = "base_model.model.";

}  // namespace

void LoraSet::add(const std::string& target, LoraDelta* d, int64_t n_in, int64_t n_out, const std::string& source) {
  auto [it, fresh] = targets_.try_emplace(target);
  Target& t = it->second;
  if (fresh) {
    t = Target{.first = d, .last = d, .n_in = n_in, .n_out = n_out, .source = source};
    return;
  }
  if (t.n_in != n_in || t.n_out != n_out) {
    throw Error(Errc::bad_format, source + " updates a [" + std::to_string(n_out) + ", " + std::to_string(n_in) +
                                      "] matrix, but " + t.source + " one of [" + std::to_string(t.n_out) + ", " +
                                      std::to_string(t.n_in) + "]");
  }
  t.last->next = d;
  t.last = d;
}

namespace {

void read_peft(const LoraAdapterSpec& spec, WeightStore& store,
               const std::function<void(const std::string&, LoraDelta*, int64_t, int64_t, const std::string&)>& add) {
  const std::string dir = spec.path;
  const HfConfig cfg = HfConfig::load((fs::path(dir) / "adapter_config.json").string());
  const std::string type = cfg.get_string("peft_type", "LORA");
  if (type != "LORA") cfg.fail(Errc::unsupported, "peft_type '" + type + "' is not supported; LoRA adapters are");
  if (cfg.get_bool("use_dora", false)) cfg.fail(Errc::unsupported, "DoRA (use_dora) is not supported");
  if (cfg.get_bool("lora_bias", false)) cfg.fail(Errc::unsupported, "lora_bias is not supported");
  if (const auto& ap = cfg.json().find("alpha_pattern"); ap != cfg.json().end() && ap->is_object() && !ap->empty()) {
    cfg.fail(Errc::unsupported, "per-module alphas (alpha_pattern) are not supported");
  }
  if (cfg.has("alora_invocation_tokens")) cfg.fail(Errc::unsupported, "activated LoRA is not supported");
  const double alpha = cfg.get_float("lora_alpha", 8.0);
  const bool rslora = cfg.get_bool("use_rslora", false);
  const std::string weights = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::exists(weights) && fs::exists(fs::path(dir) / "adapter_model.bin")) {
    throw Error(Errc::unsupported, dir +
                                       ": adapter_model.bin (a pickle) is not read; save the adapter as "
                                       "safetensors (PEFT's default)");
  }
  const safetensors::File file = safetensors::File::open(weights);
  std::map<std::string, Pair<safetensors::TensorInfo>> pairs;
  for (const safetensors::TensorInfo& t : file.tensors()) {
    std::string_view name = t.name;
    const auto which = name.ends_with(".lora_A.weight") ? 'a' : name.ends_with(".lora_B.weight") ? 'b' : 0;
    if (which == 0 || !name.starts_with(kPeftPrefix)) {
      throw Error(Errc::unsupported, weights + ": tensor '" + t.name +
                                         "' is not a LoRA A or B matrix (embedding updates, modules_to_save and "
                                         "DoRA magnitudes are not supported)");
    }
    name.remove_prefix(kPeftPrefix.size());
    name.remove_suffix(std::string_view(".lora_A.weight").size());
    if (!t.type || t.shape.size() != 2) {
      throw Error(Errc::unsupported, weights + ": tensor '" + t.name + "' is " + t.dtype + " " +
                                         safetensors::shape_string(t.shape) + "; LoRA matrices are 2-D F32/F16/BF16");
    }
    auto& p = pairs[std::string(name) + ".weight"];
    (which == 'a' ? p.a : p.b) = &t;
  }
  for (const auto& [target, p] : pairs) {
    if (p.a == nullptr || p.b == nullptr) {
      throw Error(Errc::bad_format,
                  weights + ": '" + target + "' has lora_" + (p.a ? "A" : "B") + " without lora_" + (p.a ? "B" : "A"));
    }
    const int64_t rank = p.a->shape[0], n_in = p.a->shape[1], n_out = p.b->shape[0];
    if (n_in <= 0 || n_out <= 0) throw Error(Errc::bad_format, weights + ": '" + target + "' is an empty matrix");
    if (p.b->shape[1] != rank || rank <= 0) {
      throw Error(Errc::bad_format, weights + ": '" + target + "': lora_A " + safetensors::shape_string(p.a->shape) +
                                        " and lora_B " + safetensors::shape_string(p.b->shape) +
                                        " disagree on the rank");
    }
    const double per_rank = rslora ? std::sqrt(static_cast<double>(rank)) : static_cast<double>(rank);
    const auto scale = static_cast<float>(spec.scale * alpha / per_rank);
    const std::string source = weights + " '" + p.a->name + "'";
    add(target, new_delta(store, *p.a->type, p.a->data, *p.b->type, p.b->data, rank, n_in, n_out, scale, source), n_in,
        n_out, source);
  }
}

void read_gguf_adapter(
    const LoraAdapterSpec& spec, const std::string& base_arch, WeightStore& store,
    const std::function<void(const std::string&, LoraDelta*, int64_t, int64_t, const std::string&)>& add) {
  const gguf::GgufFile file = gguf::GgufFile::open(spec.path);
  const std::string& path = spec.path;
  const auto kind = file.find_string("general.type");
  if (kind != "adapter" || file.find_string("adapter.type") != "lora") {
    throw Error(Errc::bad_format, path + ": not a LoRA adapter (general.type '" + kind.value_or("") +
                                      "', adapter.type '" + file.find_string("adapter.type").value_or("") +
                                      "'; llama.cpp's convert_lora_to_gguf.py writes one)");
  }
  const std::string arch = file.get_string("general.architecture");
  if (arch != base_arch) {
    throw Error(Errc::invalid_argument,
                path + ": an adapter for architecture '" + arch + "', and the model is '" + base_arch + "'");
  }
  if (file.has("adapter.alora.invocation_tokens")) {
    throw Error(Errc::unsupported, path + ": activated LoRA (adapter.alora.invocation_tokens) is not supported");
  }
  const float alpha = file.find_f32("adapter.lora.alpha").value_or(0.0f);
  std::map<std::string, Pair<gguf::TensorInfo>> pairs;
  for (const gguf::TensorInfo& t : file.tensors()) {
    std::string_view name = t.name;
    const auto which = name.ends_with(".lora_a") ? 'a' : name.ends_with(".lora_b") ? 'b' : 0;
    if (which == 0 || t.shape.size() != 2) {
      throw Error(Errc::unsupported, path + ": tensor '" + t.name + "' is not a LoRA A or B matrix");
    }
    name.remove_suffix(std::string_view(".lora_a").size());
    auto& p = pairs[std::string(name)];
    (which == 'a' ? p.a : p.b) = &t;
  }
  for (const auto& [target, p] : pairs) {
    if (p.a == nullptr || p.b == nullptr) {
      throw Error(Errc::bad_format,
                  path + ": '" + target + "' has " + (p.a ? "lora_a without lora_b" : "lora_b without lora_a"));
    }
    // GGUF order: a is [n_in, rank] (ne0 first), b [rank, n_out].
    const int64_t rank = p.a->shape[1], n_in = p.a->shape[0], n_out = p.b->shape[1];
    // An empty matrix (a dimension of 0, which GGUF allows) updates nothing
    // a model has: found by the lora_adapter fuzzer (a lora_b of [2, 0]).
    if (n_in <= 0 || n_out <= 0) throw Error(Errc::bad_format, path + ": '" + target + "' is an empty matrix");
    if (p.b->shape[0] != rank || rank <= 0) {
      throw Error(Errc::bad_format, path + ": '" + target + "': lora_a and lora_b disagree on the rank");
    }
    // llama.cpp's rule: alpha / rank when the file gives an alpha.
    const float scale = alpha != 0.0f ? spec.scale * alpha / static_cast<float>(rank) : spec.scale;
    const std::string source = path + " '" + p.a->name + "'";
    add(target, new_delta(store, p.a->type, p.a->data, p.b->type, p.b->data, rank, n_in, n_out, scale, source), n_in,
        n_out, source);
  }
}

}  // namespace

LoraSet LoraSet::read(const std::vector<LoraAdapterSpec>& specs, bool hf_base, const std::string& gguf_arch,
                      WeightStore& store) {
  LoraSet set;
  auto add = [&](const std::string& target, LoraDelta* d, int64_t n_in, int64_t n_out, const std::string& source) {
    set.add(target, d, n_in, n_out, source);
  };
  for (const LoraAdapterSpec& spec : specs) {
    if (!std::isfinite(spec.scale)) {
      throw Error(Errc::invalid_argument, spec.path + ": the adapter's scale is not a finite number");
    }
    const bool peft = fs::is_directory(spec.path);
    if (!peft && !fs::exists(spec.path)) throw Error(Errc::io, spec.path + ": no such LoRA adapter");
    if (peft != hf_base) {
      throw Error(Errc::unsupported,
                  spec.path + (peft ? ": a PEFT adapter applies to a Hugging Face model directory; for a GGUF "
                                      "model, convert it with llama.cpp's convert_lora_to_gguf.py"
                                    : ": a GGUF adapter applies to a GGUF model; for a Hugging Face model "
                                      "directory, give the PEFT adapter directory"));
    }
    if (peft) {
      read_peft(spec, store, add);
    } else {
      read_gguf_adapter(spec, gguf_arch, store, add);
    }
  }
  return set;
}

void LoraSet::attach(const std::string& name, Weight& w) {
  const auto it = targets_.find(name);
  if (it == targets_.end()) return;
  Target& t = it->second;
  if (t.n_in != w.n_in || t.n_out != w.n_out) {
    throw Error(Errc::bad_format, t.source + " updates a [" + std::to_string(t.n_out) + ", " + std::to_string(t.n_in) +
                                      "] matrix, and the model's '" + name + "' is [" + std::to_string(w.n_out) + ", " +
                                      std::to_string(w.n_in) + "]: an adapter for another model");
  }
  w.lora = t.first;
  w.lora_row0 = 0;
  t.used = true;
}

void LoraSet::finish(const ModelWeights& w) const {
  for (const auto& [name, t] : targets_) {
    if (!t.used) {
      throw Error(Errc::unsupported, t.source + " updates '" + name +
                                         "', which is not a matrix of this model that Troupe runs by name "
                                         "(an adapter for another model, or an expert of a fused MoE tensor)");
    }
  }
  if (w.tok_embd.lora != nullptr || w.pos_embd.lora != nullptr) {
    throw Error(Errc::unsupported, "LoRA updates of the token or position embedding are not supported");
  }
}

}  // namespace troupe
