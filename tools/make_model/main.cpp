// troupe-make-model: writes a random-weight Llama-architecture GGUF of a given
// shape and dtype, with llama.cpp's key and tensor names and a minimal SPM
// tokenizer, so benchmarks can load a model of real size that nobody trained.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/gguf_writer.hpp"
#include "model/quant_scheme.hpp"

namespace troupe {
namespace {

struct ModelShape {
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx = 2048;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool tie_embeddings = false;  // no output.weight: the output reuses token_embd
};

struct Options {
  ModelShape shape;
  DType dtype = DType::f32;        // for a mix: the type of most matrices
  std::optional<QuantScheme> mix;  // llama.cpp's per-tensor rules of a file type
  uint64_t seed = 42;
  std::string out;
  std::string name;
  int n_threads = 0;
};

// Published shapes. Both real models tie the output projection to the token
// embedding, which is what gives them their parameter counts (~110M, ~1.24B).
std::optional<ModelShape> preset(const std::string& name) {
  if (name == "110m") {
    return ModelShape{.n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12, .n_ff = 2048,
                      .n_vocab = 32000, .tie_embeddings = true};
  }
  if (name == "1b") {  // Llama-3.2-1B
    return ModelShape{.n_embd = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8, .n_ff = 8192,
                      .n_vocab = 128256, .rope_theta = 500000.0f, .tie_embeddings = true};
  }
  return std::nullopt;
}

[[noreturn]] void invalid(const std::string& msg) { throw Error(Errc::invalid_argument, msg); }

// A type's own name (q4_K, iq4_xs, ...) puts every matrix in that type;
// nullopt for another name, which parse_quant_scheme reads as a llama.cpp
// file type's mix (q4_k_m, ...).
std::optional<DType> find_dtype(const std::string& v) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0,
                  DType::q5_1, DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl,
                  DType::iq4_xs, DType::mxfp4}) {
    if (v == dtype_name(t)) return t;
  }
  return std::nullopt;
}

// Returns nullopt when the command line asked only for --help (or was wrong:
// CLI11 has printed why); throws Error(invalid_argument) for a bad shape.
std::optional<Options> parse_args(int argc, char** argv, int& exit_code) {
  CLI::App app{"Writes a Llama-architecture GGUF with random weights (normal, std 0.02; norms 1).\n"
               "Flags override the preset's values; without a preset --dim --layers --heads --ffn\n"
               "--vocab are required. The presets tie the output to the token embedding, as the\n"
               "real models do.",
               "troupe-make-model"};
  Options o;
  ModelShape& s = o.shape;
  std::string preset_name, dtype = "f32";
  bool tie = false;
  // Every shape field is a GGUF u32.
  const auto shape_range = CLI::Range(int64_t{1}, int64_t{UINT32_MAX});
  auto* o_preset = app.add_option("--preset", preset_name, "Published shape")->check(CLI::IsMember({"110m", "1b"}));
  auto* o_dim = app.add_option("--dim", s.n_embd, "Embedding width (n_embd)")->check(shape_range);
  auto* o_layers = app.add_option("--layers", s.n_layer, "Number of blocks")->check(shape_range);
  auto* o_heads = app.add_option("--heads", s.n_head, "Attention heads")->check(shape_range);
  auto* o_kv = app.add_option("--kv-heads", s.n_head_kv, "KV heads (default: --heads)")->check(shape_range);
  auto* o_ffn = app.add_option("--ffn", s.n_ff, "Feed-forward width")->check(shape_range);
  auto* o_vocab = app.add_option("--vocab", s.n_vocab, "Vocabulary size (>= 259)")->check(shape_range);
  auto* o_ctx = app.add_option("--ctx", s.n_ctx, "Context length (default 2048)")->check(shape_range);
  auto* o_theta = app.add_option("--rope-theta", s.rope_theta, "RoPE base (default 10000; 1b: 500000)")
                      ->check(CLI::PositiveNumber);
  auto* o_tie = app.add_flag("--tie-embeddings,!--no-tie-embeddings", tie,
                             "Omit output.weight (the output reuses token_embd)");
  app.add_option("--dtype", dtype,
                 "Matrix dtype (norms are always f32), or llama.cpp's mix of a file type: q2_k, q3_k_m,\n"
                 "q4_k_m, q5_k_m, q6_k (q4_k_m: q4_K, with q6_K for the output matrix and for\n"
                 "attn_v/ffn_down of some layers)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K",
                             "q5_K", "q6_K", "iq4_nl", "iq4_xs", "mxfp4", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m",
                             "q6_k"}));
  app.add_option("--seed", o.seed, "Random seed");
  app.add_option("--threads", o.n_threads, "Generator threads (default: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--name", o.name, "general.name");
  app.add_option("--out", o.out, "Output file")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return std::nullopt;
  }

  if (*o_preset) {
    // Start from the preset and keep what was given on the command line.
    const ModelShape given = s;
    s = *preset(preset_name);
    if (*o_dim) s.n_embd = given.n_embd;
    if (*o_layers) s.n_layer = given.n_layer;
    if (*o_heads) s.n_head = given.n_head;
    if (*o_ffn) s.n_ff = given.n_ff;
    if (*o_vocab) s.n_vocab = given.n_vocab;
    if (*o_ctx) s.n_ctx = given.n_ctx;
    if (*o_theta) s.rope_theta = given.rope_theta;
    if (*o_kv) s.n_head_kv = given.n_head_kv;
  } else if (!*o_dim || !*o_layers || !*o_heads || !*o_ffn || !*o_vocab) {
    invalid("without --preset, --dim --layers --heads --ffn --vocab are required (see --help)");
  }
  if (!*o_kv && (*o_heads || !*o_preset)) s.n_head_kv = s.n_head;  // plain multi-head attention
  if (*o_tie) s.tie_embeddings = tie;
  if (const std::optional<DType> t = find_dtype(dtype)) {
    o.dtype = *t;
  } else {
    o.mix = parse_quant_scheme(dtype);  // the --dtype check admits only the mixes here
    o.dtype = o.mix->base;
  }
  if (o.name.empty()) o.name = "troupe-random-" + (*o_preset ? preset_name : std::string("custom"));

  if (s.n_embd % s.n_head != 0) invalid("--dim must be a multiple of --heads");
  if (s.n_head % s.n_head_kv != 0) invalid("--heads must be a multiple of --kv-heads");
  if ((s.n_embd / s.n_head) % 2 != 0) invalid("head_dim (dim / heads) must be even for RoPE");
  const int64_t block = dtype_info(o.dtype).block_size;
  if (s.n_embd % block != 0 || s.n_ff % block != 0) {
    invalid("--dim and --ffn must be multiples of " + std::to_string(block) + " for " + dtype);
  }
  if (s.n_vocab < 3 + 256) invalid("--vocab must be at least 259 (3 specials and 256 byte tokens)");
  return o;
}

// --- random weights ---

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// xoshiro256+ (Blackman and Vigna): fast, and plenty for weights nobody
// will look at, only multiply.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) w = seed = splitmix64(seed);
  }
  // Uniform in (0, 1]: never 0, so log() in Box-Muller stays finite.
  float uniform() { return static_cast<float>((next() >> 40) + 1) * 0x1.0p-24f; }

 private:
  uint64_t next() {
    const uint64_t r = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0], s_[3] ^= s_[1], s_[1] ^= s_[2], s_[0] ^= s_[3], s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return r;
  }
  uint64_t s_[4];
};

// Normal(0, stddev) values by Box-Muller. Every row has its own generator seeded
// from (seed, tensor, row), so the file is the same whatever the thread count.
void normal_row(uint64_t seed, uint64_t tensor, int64_t row, float stddev, float* dst, int64_t n) {
  Rng rng(splitmix64(seed ^ splitmix64(tensor << 40 ^ static_cast<uint64_t>(row))));
  for (int64_t i = 0; i < n; i += 2) {
    const float r = stddev * std::sqrt(-2.0f * std::log(rng.uniform()));
    const float a = 6.283185307f * rng.uniform();
    dst[i] = r * std::cos(a);
    if (i + 1 < n) dst[i + 1] = r * std::sin(a);
  }
}

// --- the model ---

// llama.cpp's general.file_type (llama_ftype) for a file of mostly `t`.
uint32_t file_type(const Options& o) {
  if (o.mix) {
    const std::string& m = o.mix->name;
    if (m == "q3_k_m") return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    if (m == "q4_k_m") return 15;
    if (m == "q5_k_m") return 17;
  }
  switch (o.dtype) {
    case DType::f32: return 0;
    case DType::f16: return 1;
    case DType::q4_0: return 2;
    case DType::q4_1: return 3;
    case DType::q8_0: return 7;
    case DType::q5_0: return 8;
    case DType::q5_1: return 9;
    case DType::q2_K: return 10;
    case DType::q3_K: return 11;  // _S: all q3_K
    case DType::q4_K: return 14;  // _S: all q4_K
    case DType::q5_K: return 16;
    case DType::q6_K: return 18;
    case DType::iq4_nl: return 25;
    case DType::iq4_xs: return 30;
    case DType::mxfp4: return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE (here every matrix)
    case DType::bf16: return 32;
  }
  return 0;
}


// A llama (SentencePiece) vocabulary: <unk> <s> </s>, the 256 byte-fallback
// pieces, then distinct filler pieces with falling scores.
void add_tokenizer(gguf::GgufWriter& w, int64_t n_vocab) {
  enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };  // llama.cpp token types
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    tokens.emplace_back(piece);
    types.push_back(kByte);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  for (int64_t i = 0; static_cast<int64_t>(tokens.size()) < n_vocab; ++i) {
    // Letters for i / 2 in bijective base 26 ("a".."z", "aa", ...), every
    // other one with SentencePiece's word-start mark U+2581.
    std::string letters;
    for (int64_t k = i / 2 + 1; k > 0; k = (k - 1) / 26) letters.insert(letters.begin(), char('a' + (k - 1) % 26));
    tokens.push_back((i % 2 == 0 ? "\xE2\x96\x81" : "") + letters);
    types.push_back(kNormal);
    scores.push_back(-static_cast<float>(i));
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", std::move(tokens));
  w.add_f32_array("tokenizer.ggml.scores", std::move(scores));
  w.add_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
}

class ModelWriter {
 public:
  explicit ModelWriter(const Options& o) : o_(o), pool_(o.n_threads) {}

  void write() {
    const ModelShape& s = o_.shape;
    const int64_t head_dim = s.n_embd / s.n_head;
    const int64_t n_embd_kv = head_dim * s.n_head_kv;
    w_.add_string("general.architecture", "llama");
    w_.add_string("general.name", o_.name);
    w_.add_u32("general.file_type", file_type(o_));
    w_.add_u32("llama.vocab_size", u32(s.n_vocab));
    w_.add_u32("llama.context_length", u32(s.n_ctx));
    w_.add_u32("llama.embedding_length", u32(s.n_embd));
    w_.add_u32("llama.block_count", u32(s.n_layer));
    w_.add_u32("llama.feed_forward_length", u32(s.n_ff));
    w_.add_u32("llama.attention.head_count", u32(s.n_head));
    w_.add_u32("llama.attention.head_count_kv", u32(s.n_head_kv));
    w_.add_u32("llama.rope.dimension_count", u32(head_dim));
    w_.add_f32("llama.rope.freq_base", s.rope_theta);
    w_.add_f32("llama.attention.layer_norm_rms_epsilon", s.norm_eps);
    add_tokenizer(w_, s.n_vocab);

    // Shapes in GGUF order: {row length = input dim, rows = output dim}.
    // A mix gives each matrix the type llama.cpp's quantizer would (Q4_K_M:
    // q6_K for the output matrix, or the token embedding when tied, and for
    // attn_v/ffn_down in the layers use_more_bits picks; q4_K elsewhere).
    const QuantShape shape{.n_layer = s.n_layer, .n_head = s.n_head, .n_head_kv = s.n_head_kv,
                           .tied_output = s.tie_embeddings};
    auto type = [&](const std::string& label, int64_t n_in) {
      return o_.mix ? scheme_type(*o_.mix, label, n_in, shape) : o_.dtype;
    };
    matrix("token_embd", s.n_embd, s.n_vocab, type("token_embd", s.n_embd));
    norm("output_norm.weight", s.n_embd);
    if (!s.tie_embeddings) matrix("output", s.n_embd, s.n_vocab, type("output", s.n_embd));
    for (int64_t l = 0; l < s.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      norm(p + "attn_norm.weight", s.n_embd);
      for (const auto& [role, n_in, n_out] : {std::tuple{"attn_q", s.n_embd, s.n_embd},
                                              std::tuple{"attn_k", s.n_embd, n_embd_kv},
                                              std::tuple{"attn_v", s.n_embd, n_embd_kv},
                                              std::tuple{"attn_output", s.n_embd, s.n_embd}}) {
        matrix(p + role, n_in, n_out, type(p + role, n_in));
      }
      norm(p + "ffn_norm.weight", s.n_embd);
      for (const auto& [role, n_in, n_out] : {std::tuple{"ffn_gate", s.n_embd, s.n_ff},
                                              std::tuple{"ffn_up", s.n_embd, s.n_ff},
                                              std::tuple{"ffn_down", s.n_ff, s.n_embd}}) {
        matrix(p + role, n_in, n_out, type(p + role, n_in));
      }
    }
    w_.write(o_.out);
  }

  int64_t n_params() const { return n_params_; }
  int64_t n_bytes() const { return n_bytes_; }

 private:
  static uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }  // parse_args bounds every field

  // RMSNorm weights of ones: the norm then only normalises, as at init.
  void norm(const std::string& name, int64_t n) {
    std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    std::vector<uint8_t> bytes(ones.size() * 4);
    std::memcpy(bytes.data(), ones.data(), bytes.size());
    add(name, DType::f32, {n}, std::move(bytes));
  }

  // Generated only when the writer reaches this tensor, a chunk of rows at a
  // time, the rows of a chunk spread over the thread pool.
  // `label` is for_each_matrix's: the tensor is label + ".weight".
  void matrix(const std::string& label, int64_t n_in, int64_t n_out, DType type) {
    const uint64_t index = tensor_index_++;
    const int64_t row = row_bytes(type, n_in);
    auto source = [this, index, type, n_in, row](int64_t first, int64_t n_rows, uint8_t* dst) {
      pool_.parallel_for(n_rows, [&](int64_t begin, int64_t end) {
        std::vector<float> x(static_cast<size_t>(n_in));
        for (int64_t r = begin; r < end; ++r) {
          normal_row(o_.seed, index, first + r, 0.02f, x.data(), n_in);
          quantize_row(type, x.data(), dst + r * row, n_in);
        }
      });
    };
    n_params_ += n_in * n_out;
    n_bytes_ += row * n_out;
    w_.add_tensor(label + ".weight", type, {n_in, n_out}, source);
  }

  void add(const std::string& name, DType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    ++tensor_index_;
    n_params_ += shape[0];
    n_bytes_ += static_cast<int64_t>(bytes.size());
    w_.add_tensor(name, type, std::move(shape), std::move(bytes));
  }

  const Options& o_;
  ThreadPool pool_;
  gguf::GgufWriter w_;
  uint64_t tensor_index_ = 0;
  int64_t n_params_ = 0;
  int64_t n_bytes_ = 0;
};

int run(int argc, char** argv) {
  int exit_code = 0;
  const std::optional<Options> parsed = parse_args(argc, argv, exit_code);
  if (!parsed) return exit_code;
  const Options& o = *parsed;
  const auto t0 = std::chrono::steady_clock::now();
  ModelWriter m(o);
  m.write();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ModelShape& s = o.shape;
  std::printf("%s: llama, %lld params (%.3fB), dim %lld, %lld layers, %lld/%lld heads, ffn %lld, vocab %lld, %s%s, "
              "%.2f GB of tensors, written in %.1f s\n",
              o.out.c_str(), static_cast<long long>(m.n_params()), static_cast<double>(m.n_params()) / 1e9,
              static_cast<long long>(s.n_embd), static_cast<long long>(s.n_layer), static_cast<long long>(s.n_head),
              static_cast<long long>(s.n_head_kv), static_cast<long long>(s.n_ff),
              static_cast<long long>(s.n_vocab), o.mix ? o.mix->name.c_str() : std::string(dtype_name(o.dtype)).c_str(),
              s.tie_embeddings ? ", tied output" : "", static_cast<double>(m.n_bytes()) / 1e9, secs);
  return 0;
}

}  // namespace
}  // namespace troupe

int main(int argc, char** argv) {
  try {
    return troupe::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-make-model: %s\n", e.what());
    return 1;
  }
}
