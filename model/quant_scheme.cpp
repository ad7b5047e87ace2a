// The per-tensor rules of llama.cpp's llama_tensor_get_type for the file
// types Troupe quantizes to, restated for for_each_matrix's labels. Only the
// rules of these file types are here (not Q3_K_S/L, Q4_K_S, the lattice
// i-quants, Falcon's, or the imatrix-only ones).
#include "model/quant_scheme.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/error.hpp"

namespace troupe {
namespace {

struct Named {
  const char* name;
  DType base;
  bool mixed;
};

constexpr Named kSchemes[] = {
    {"f16", DType::f16, false},      {"bf16", DType::bf16, false},     {"q8_0", DType::q8_0, false},
    {"q4_0", DType::q4_0, false},    {"q4_1", DType::q4_1, false},     {"q5_0", DType::q5_0, false},
    {"q5_1", DType::q5_1, false},    {"q2_k", DType::q2_K, true},      {"q3_k_m", DType::q3_K, true},
    {"q4_k_m", DType::q4_K, true},   {"q5_k_m", DType::q5_K, true},    {"q6_k", DType::q6_K, true},
    {"iq4_nl", DType::iq4_nl, true}, {"iq4_xs", DType::iq4_xs, true},   {"mxfp4", DType::mxfp4, false},
};

bool is(const QuantScheme& s, const char* name) { return s.name == name; }

// "blk.12.ffn_down.expert.3" -> layer 12, role "ffn_down"; other labels
// ("token_embd", "output") -> layer -1, role = label.
struct Place {
  int64_t layer = -1;
  std::string role;
};

Place place_of(const std::string& label) {
  if (label.rfind("blk.", 0) != 0) return {.layer = -1, .role = label};
  const size_t dot = label.find('.', 4);
  const size_t end = label.find('.', dot + 1);
  return {.layer = std::strtoll(label.c_str() + 4, nullptr, 10),
          .role = label.substr(dot + 1, end == std::string::npos ? std::string::npos : end - dot - 1)};
}

// Where n_in splits into no block of t: llama.cpp's wider fallback, then f16.
DType fit_rows(DType t, int64_t n_in) {
  if (n_in % dtype_info(t).block_size == 0) return t;
  switch (t) {
    case DType::q2_K:
    case DType::q3_K:
    case DType::iq4_xs: t = DType::iq4_nl; break;
    case DType::q4_K: t = DType::q5_0; break;
    case DType::q5_K: t = DType::q5_1; break;
    case DType::q6_K: t = DType::q8_0; break;
    default: return DType::f16;
  }
  return n_in % dtype_info(t).block_size == 0 ? t : DType::f16;
}

DType mixed_type(const QuantScheme& s, const Place& p, int64_t n_in, const QuantShape& m) {
  const bool output = p.role == "output" || (p.role == "token_embd" && m.tied_output);
  if (output) {
    if (n_in % dtype_info(s.base).block_size != 0) return DType::q8_0;
    return DType::q6_K;
  }
  const int64_t n_gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 1;
  const bool eight_experts = m.n_expert == 8;
  const int64_t i = p.layer;
  const int64_t n = m.n_layer;
  DType t = s.base;
  if (p.role == "attn_v") {
    if (is(s, "q2_k")) {
      t = n_gqa >= 4 ? DType::q4_K : DType::q3_K;
    } else if (is(s, "q3_k_m")) {
      t = i < 2 ? DType::q5_K : DType::q4_K;
    } else if ((is(s, "iq4_nl") || is(s, "iq4_xs")) && n_gqa >= 4) {
      t = DType::q5_K;
    } else if ((is(s, "q4_k_m") || is(s, "q5_k_m")) && use_more_bits(i, n)) {
      t = DType::q6_K;
    }
    // llama.cpp's 70B rule (80 llama layers share 8 kv heads): more bits
    // for the small attn_v.
    if (n == 80 && (t == DType::q3_K || t == DType::q4_K)) t = DType::q5_K;
    if (eight_experts) t = DType::q8_0;
  } else if (p.role == "attn_k") {
    if (eight_experts) t = DType::q8_0;
  } else if (p.role == "ffn_down") {
    if (is(s, "q2_k")) {
      t = DType::q3_K;
    } else if (is(s, "q3_k_m")) {
      t = i < n / 16 ? DType::q5_K : DType::q4_K;
    } else if ((is(s, "q4_k_m") || is(s, "q5_k_m")) && use_more_bits(i, n)) {
      t = DType::q6_K;
    } else if ((is(s, "iq4_nl") || is(s, "iq4_xs")) && i < n / 8) {
      t = DType::q5_K;  // llama.cpp's rule without an importance matrix
    }
  } else if (p.role == "attn_output") {
    if (eight_experts) {
      if (!is(s, "q5_k_m") && !is(s, "q6_k")) t = DType::q5_K;
    } else if (is(s, "q2_k")) {
      t = DType::q3_K;
    } else if (is(s, "q3_k_m")) {
      t = DType::q4_K;
    }
  }
  return t;
}

}  // namespace

bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

std::string quant_scheme_names() {
  std::string out;
  for (const Named& n : kSchemes) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

QuantScheme parse_quant_scheme(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const Named& n : kSchemes) {
    if (lower == n.name) return {.name = n.name, .base = n.base, .mixed = n.mixed};
  }
  throw Error(Errc::invalid_argument,
              "unknown quantization '" + std::string(name) + "'; supported: " + quant_scheme_names());
}

DType scheme_type(const QuantScheme& s, const std::string& label, int64_t n_in, const QuantShape& shape) {
  if (!s.mixed) return s.base;
  return fit_rows(mixed_type(s, place_of(label), n_in, shape), n_in);
}

}  // namespace troupe
