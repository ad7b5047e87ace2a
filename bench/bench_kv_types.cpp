// KV cache types against the f32 cache in the same run (issue 15).
//
// Speed: decode tokens/s of `--streams` sequences that each hold `--ctx`
// tokens of context, one stage per KV type. Stream 0 is prefilled (the same
// random tokens for every type) and its blocks copied to the other streams'
// own blocks (ModelStage::copy_kv_block), so every stream reads its own
// memory as separate requests would, at 1/streams of the prefill time.
// The streams are then decoded in interleaved rounds
// (type order rotating), so machine noise hits every type alike. Reports
// each type's median over the rounds and its ratio to f32.
//   bench_kv_types [--ctx 4096] [--streams 8] [--decode 16] [--rounds 5]
//                  [--threads 2] [--types f32,f16,bf16,q8_0] model.gguf
//
// Perplexity: `--ppl FILE` (repeatable) tokenizes the files' text, back to
// back, with the model's tokenizer and scores it in windows of the model's
// context (at most --ppl-window tokens), one decode step per token so every
// position reads the cache as generation does; prints the perplexity per
// type, the number of tokens, and the mean and max |delta logprob| against f32.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/cpu_backend.hpp"
#include "memory/kv_type.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/model_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using troupe::KvType;

struct Args {
  int64_t ctx = 4096;
  int32_t streams = 8;
  int64_t decode = 16;
  int rounds = 5;
  int threads = 2;
  std::vector<KvType> types = {KvType::f32, KvType::f16, KvType::bf16, KvType::q8_0};
  std::vector<std::string> ppl_files;
  int64_t ppl_window = 4096;
  std::string model;
};

std::vector<KvType> parse_types(const std::string& s) {
  std::vector<KvType> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(troupe::parse_kv_type(item));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// One stage per KV type, each holding `streams` sequences of ctx tokens.
struct Contender {
  KvType type;
  std::unique_ptr<troupe::ModelStage> stage;
  std::vector<double> tok_s;
};

void run_speed(const Args& a, const std::shared_ptr<const troupe::Model>& model) {
  const troupe::ModelConfig& c = model->config();
  troupe::CpuBackend backend({.n_threads = a.threads});
  const int64_t bs = 16;
  const int64_t per_seq = (a.ctx + a.decode + bs - 1) / bs;
  const int64_t chunk = 512;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(a.streams));
  for (int32_t s = 0; s < a.streams; ++s) {
    for (int64_t b = 0; b < per_seq; ++b) tables[static_cast<size_t>(s)].push_back(static_cast<int32_t>(s * per_seq + b));
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.n_vocab - 1));
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(a.streams));
  for (auto& p : prompts) {
    for (int64_t i = 0; i < a.ctx; ++i) p.push_back(tok(rng));
  }
  std::vector<float> out(static_cast<size_t>(a.streams * c.n_vocab));

  std::vector<Contender> cs;
  for (KvType t : a.types) {
    const troupe::StageOptions o{.max_tokens = chunk,
                                 .max_seqs = a.streams,
                                 .n_kv_blocks = a.streams * per_seq,
                                 .kv_block_size = bs,
                                 .kv_type = t};
    Contender ct{.type = t, .stage = std::make_unique<troupe::ModelStage>(model, backend, o), .tok_s = {}};
    const auto t0 = Clock::now();
    for (int32_t s = 0; s < 1; ++s) {
      for (int64_t i = 0; i < a.ctx; i += chunk) {
        const int64_t n = std::min(chunk, a.ctx - i);
        const troupe::BatchSeq seq{.n_tokens = static_cast<int32_t>(n),
                                   .n_past = static_cast<int32_t>(i),
                                   .block_table = tables[static_cast<size_t>(s)],
                                   .n_logits = 0};
        const troupe::BatchView view{.tokens = std::span(prompts[static_cast<size_t>(s)]).subspan(i, n),
                                     .seqs = std::span(&seq, 1)};
        ct.stage->forward(view, nullptr, out.data());
      }
    }
    const int64_t filled = (a.ctx + bs - 1) / bs;
    for (int32_t s = 1; s < a.streams; ++s) {
      for (int64_t b = 0; b < filled; ++b) {
        ct.stage->copy_kv_block(tables[0][static_cast<size_t>(b)], tables[static_cast<size_t>(s)][static_cast<size_t>(b)]);
      }
    }
    std::fprintf(stderr, "bench_kv_types: %s cache: %.1f MiB, prefilled %d x %lld tokens in %.1f s\n",
                 troupe::kv_type_name(t), static_cast<double>(ct.stage->kv_bytes()) / (1024.0 * 1024.0), a.streams,
                 static_cast<long long>(a.ctx), std::chrono::duration<double>(Clock::now() - t0).count());
    cs.push_back(std::move(ct));
  }

  // Decode rounds: every type decodes the same `decode` steps from position
  // ctx (a later round rewrites the same slots), in a rotating order.
  std::vector<int32_t> step_tokens(static_cast<size_t>(a.streams));
  std::vector<troupe::BatchSeq> seqs(static_cast<size_t>(a.streams));
  for (int r = 0; r < a.rounds; ++r) {
    for (size_t k = 0; k < cs.size(); ++k) {
      Contender& ct = cs[(k + static_cast<size_t>(r)) % cs.size()];
      const auto t0 = Clock::now();
      for (int64_t d = 0; d < a.decode; ++d) {
        for (int32_t s = 0; s < a.streams; ++s) {
          step_tokens[static_cast<size_t>(s)] = tok(rng);
          seqs[static_cast<size_t>(s)] = {.n_tokens = 1,
                                          .n_past = static_cast<int32_t>(a.ctx + d),
                                          .block_table = tables[static_cast<size_t>(s)],
                                          .n_logits = 1};
        }
        ct.stage->forward({.tokens = step_tokens, .seqs = seqs}, nullptr, out.data());
      }
      const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
      ct.tok_s.push_back(static_cast<double>(a.streams * a.decode) / sec);
    }
  }
  const double base = median(cs.front().tok_s);
  std::printf("\n%s, context %lld, %d streams, %d threads, %s kernels, median of %d rounds of %lld steps\n\n",
              model->path().c_str(), static_cast<long long>(a.ctx), a.streams, a.threads,
              std::string(troupe::isa_name(troupe::active_isa())).c_str(), a.rounds,
              static_cast<long long>(a.decode));
  std::printf("| KV type | bytes/token | KV MiB | decode tok/s | vs %s | rounds (tok/s) |\n|---|---|---|---|---|---|\n",
              troupe::kv_type_name(cs.front().type));
  for (const Contender& ct : cs) {
    std::string all;
    for (double v : ct.tok_s) {
      if (!all.empty()) all += ' ';
      all += std::to_string(static_cast<int>(std::lround(v)));
    }
    std::printf("| %s | %lld | %.0f | %.1f | %.2fx | %s |\n", troupe::kv_type_name(ct.type),
                static_cast<long long>(ct.stage->kv_token_bytes()),
                static_cast<double>(ct.stage->kv_bytes()) / (1024.0 * 1024.0), median(ct.tok_s),
                median(ct.tok_s) / base, all.c_str());
  }
}

void run_ppl(const Args& a, const std::shared_ptr<const troupe::Model>& model) {
  std::string text;
  for (const std::string& f : a.ppl_files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + f);
    std::ostringstream s;
    s << in.rdbuf();
    text += s.str();
  }
  const auto tokenizer = troupe::load_model_tokenizer(*model);
  const std::vector<int32_t> ids = tokenizer->encode(text, false, false);
  const troupe::ModelConfig& c = model->config();
  const int64_t window = std::min<int64_t>(a.ppl_window, c.n_ctx_train > 0 ? c.n_ctx_train : a.ppl_window);
  troupe::CpuBackend backend({.n_threads = a.threads});
  std::printf("\n%s: %zu tokens of %zu files, windows of %lld tokens\n\n", model->path().c_str(), ids.size(),
              a.ppl_files.size(), static_cast<long long>(window));
  std::printf("| KV type | perplexity | tokens scored | mean abs delta logprob | max abs delta logprob |\n"
              "|---|---|---|---|---|\n");
  std::vector<double> ref;
  for (KvType t : a.types) {
    troupe::Generator g(model, backend, {.n_ctx = window, .kv_type = t});
    std::vector<double> lp;
    for (size_t i = 0; i + 1 < ids.size(); i += static_cast<size_t>(window)) {
      const size_t n = std::min(ids.size() - i, static_cast<size_t>(window));
      if (n < 2) break;
      const std::vector<double> part = g.token_logprobs(std::span(ids).subspan(i, n));
      lp.insert(lp.end(), part.begin(), part.end());
    }
    double sum = 0, dsum = 0, dmax = 0;
    for (size_t i = 0; i < lp.size(); ++i) {
      sum += lp[i];
      if (!ref.empty()) {
        dsum += std::abs(lp[i] - ref[i]);
        dmax = std::max(dmax, std::abs(lp[i] - ref[i]));
      }
    }
    if (ref.empty()) ref = lp;
    std::printf("| %s | %.4f | %zu | %.2e | %.2e |\n", troupe::kv_type_name(t),
                std::exp(-sum / static_cast<double>(lp.size())), lp.size(), dsum / static_cast<double>(lp.size()),
                dmax);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string s = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(s + " needs a value");
        return argv[++i];
      };
      if (s == "--ctx") a.ctx = std::stoll(next());
      else if (s == "--streams") a.streams = std::stoi(next());
      else if (s == "--decode") a.decode = std::stoll(next());
      else if (s == "--rounds") a.rounds = std::stoi(next());
      else if (s == "--threads") a.threads = std::stoi(next());
      else if (s == "--types") a.types = parse_types(next());
      else if (s == "--ppl") a.ppl_files.push_back(next());
      else if (s == "--ppl-window") a.ppl_window = std::stoll(next());
      else if (!s.empty() && s[0] == '-') throw std::runtime_error("unknown option " + s);
      else a.model = s;
    }
    if (a.model.empty() || a.types.empty() || a.ctx < 1 || a.streams < 1 || a.decode < 1 || a.rounds < 1) {
      throw std::runtime_error("usage: bench_kv_types [--ctx 4096] [--streams 8] [--decode 16] [--rounds 5] "
                               "[--threads 2] [--types f32,f16,bf16,q8_0] [--ppl FILE]... model.gguf");
    }
    const auto model = troupe::Model::load(a.model);
    if (a.ppl_files.empty()) {
      run_speed(a, model);
    } else {
      run_ppl(a, model);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kv_types: %s\n", e.what());
    return 1;
  }
  return 0;
}
