// `troupe generate`: load a model, run one prompt through the engine (on the
// CPU, a GPU, or layers split between them) and stream the text to stdout;
// timing goes to stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "grammar/output_format.hpp"
#include "grammar/token_grammar.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/device.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"
#include "model/model_tokenizer.hpp"
#include "model/stage_plan.hpp"
#include "model/vocab_trie.hpp"
#include "tokenizer/incremental_decoder.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/cpu_options.hpp"
#include "tools/cli/default_model.hpp"
#include "tools/cli/lora_option.hpp"
#include "tools/cli/quantize_option.hpp"

namespace troupe::cli {
namespace {

struct GenerateArgs {
  CpuArgs cpu;
  std::string model;
  std::string prompt;
  int64_t max_tokens = 200;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 42;
  int threads = 0;
  int64_t ctx = 0;
  std::string isa;
  std::string quantize;
  LoraArgs lora;
  std::string device = "cpu";
  std::string kv_type = "f32";
  int64_t gpu_layers = -1;  // -1: not given
  bool no_bos = false;
  bool stats = true;
  bool json = false;         // JSON mode: the output is a JSON object
  std::string json_schema;   // a JSON schema, or @FILE holding one
  std::string grammar;       // a GBNF grammar
  std::string grammar_file;  // a file holding one
};

std::string read_text_file(const std::string& path, const char* option) {
  std::ifstream in(path);
  if (!in) throw Error(Errc::io, std::string(option) + ": cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The output constraint the options ask for, or null.
std::unique_ptr<grammar::TokenGrammar> output_constraint(const GenerateArgs& a, const Tokenizer& tokenizer) {
  const int given = int(a.json) + int(!a.json_schema.empty()) + int(!a.grammar.empty()) + int(!a.grammar_file.empty());
  if (given == 0) return nullptr;
  if (given > 1) throw Error(Errc::invalid_argument, "give one of --json, --json-schema, --grammar, --grammar-file");
  OutputFormat format{.kind = OutputFormat::Kind::json_object, .schema = {}, .param = "--json"};
  if (!a.json_schema.empty()) {
    format = {.kind = OutputFormat::Kind::json_schema, .schema = a.json_schema, .param = "--json-schema"};
    if (a.json_schema[0] == '@') format.schema = read_text_file(a.json_schema.substr(1), "--json-schema");
  } else if (!a.grammar.empty()) {
    format = {.kind = OutputFormat::Kind::gbnf, .schema = a.grammar, .param = "--grammar"};
  } else if (!a.grammar_file.empty()) {
    format = {.kind = OutputFormat::Kind::gbnf, .schema = read_text_file(a.grammar_file, "--grammar-file"),
              .param = "--grammar-file"};
  }
  try {
    return std::make_unique<grammar::TokenGrammar>(output_grammar(format), vocab_trie(tokenizer));
  } catch (const Error& e) {
    throw Error(Errc::invalid_argument, format.param + ": " + e.what());
  }
}

Isa isa_option(const std::string& s) {
  if (const auto isa = parse_isa(s)) return *isa;
  throw Error(Errc::invalid_argument, "--isa must be scalar, avx2 or avx512, not '" + s + "'");
}

void run_generate(const GenerateArgs& a) {
  apply_cpu_options(a.cpu);
  if (!a.isa.empty()) force_isa(isa_option(a.isa));
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  // A wrong device name fails before the model is read; a GPU that cannot
  // be used fails when the plan's backends open (the model is only mapped).
  const Device device = parse_device(a.device);
  const KvType kv_type = parse_kv_type(a.kv_type);
  ModelLoadOptions load_options;
  load_options.quantize = quantize_scheme(a.quantize);
  load_options.context_length = a.ctx > 0 ? a.ctx : 4096;  // the Generator's default cap
  load_options.lora = a.lora.specs();
  std::fprintf(stderr, "troupe: loading %s%s%s\n", path.c_str(), quantize_note(load_options.quantize).c_str(),
               lora_note(load_options.lora).c_str());
  auto model = Model::load(path, load_options);
  auto tokenizer = load_model_tokenizer(*model);

  const std::unique_ptr<grammar::TokenGrammar> constraint = output_constraint(a, *tokenizer);
  std::vector<int32_t> prompt = tokenizer->encode(a.prompt, !a.no_bos, true);
  if (prompt.empty()) prompt.push_back(tokenizer->bos());

  const int64_t n_layer = model->config().n_layer;
  std::vector<StagePlacement> placements;
  if (a.gpu_layers >= 0) {
    placements = split_gpu_layers(n_layer, a.gpu_layers, a.threads, device.is_cuda() ? device.str() : "cuda:0");
  } else {
    placements = {{.first_layer = 0, .last_layer = n_layer, .device = device.str(), .threads = a.threads}};
  }
  const GeneratorOptions gen_options{.n_ctx = a.ctx, .kv_type = kv_type};
  const std::vector<PlannedStage> plan =
      plan_stages(*model, placements, Generator::stage_limits(model->config(), gen_options));
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<GeneratorStage> stages;
  std::string where;
  for (const PlannedStage& p : plan) {
    const StageFootprint& fp = p.footprint;
    backends.push_back(open_backend(p.device, p.threads,
                                    {.weight_bytes = fp.weight_bytes, .kv_bytes = fp.kv_bytes, .arena_bytes = fp.arena_bytes}));
    stages.push_back({.backend = backends.back().get(), .first_layer = p.first_layer, .last_layer = p.last_layer});
    where += (where.empty() ? "" : " + ") + std::string("layers ") + std::to_string(p.first_layer) + "-" +
             std::to_string(p.last_layer - 1) + " on " + p.device.str();
  }
  Generator gen(model, stages, gen_options);
  const ModelConfig& mc = model->config();
  const int64_t token_bytes = stage_kv_token_bytes(mc, 0, mc.n_layer, kv_type);
  std::fprintf(stderr, "troupe: KV cache %s, %lld bytes per token, %lld tokens (%s)\n", kv_type_name(kv_type),
               static_cast<long long>(token_bytes), static_cast<long long>(gen.n_ctx()),
               format_bytes(token_bytes * gen.n_ctx()).c_str());
  if (const int64_t state = stage_state_bytes(mc, 0, mc.n_layer); state > 0) {
    std::fprintf(stderr, "troupe: recurrent state %s per sequence (f32)\n", format_bytes(state).c_str());
  }
  GenerateRequest req{.max_new_tokens = a.max_tokens,
                      .sampling = {.temperature = a.temperature,
                                   .top_k = a.top_k,
                                   .top_p = a.top_p,
                                   .min_p = a.min_p,
                                   .repetition_penalty = a.repeat_penalty,
                                   .seed = a.seed}};
  for (int32_t id = 0; id < tokenizer->n_vocab(); ++id) {
    if (tokenizer->is_eog(id)) req.stop_tokens.push_back(id);
  }
  req.constraint = constraint.get();

  std::fputs(a.prompt.c_str(), stdout);
  IncrementalDecoder decoder(*tokenizer);
  gen.generate(prompt, req, [&](int32_t token) {
    if (tokenizer->is_eog(token)) return false;
    const std::string piece = decoder.push(token);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  const std::string rest = decoder.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);

  if (a.stats) {
    int cpu_threads = 0;
    for (const auto& b : backends) {
      if (auto* cpu = dynamic_cast<CpuBackend*>(b.get())) cpu_threads = static_cast<int>(cpu->pool().size());
    }
    // The CPU kernels' description only where a stage runs on the CPU.
    const std::string cpu = cpu_threads > 0
                                ? ", " + std::to_string(cpu_threads) + " CPU threads, " + cpu_math_summary()
                                : std::string();
    const GenerateStats& s = gen.stats();
    std::fprintf(stderr,
                 "troupe: %lld prompt tokens in %.3f s (%.1f tok/s), %lld generated in %.3f s (%.1f tok/s), "
                 "%s%s\n",
                 static_cast<long long>(s.prompt_tokens), s.prefill_seconds,
                 s.prefill_seconds > 0 ? static_cast<double>(s.prompt_tokens) / s.prefill_seconds : 0.0,
                 static_cast<long long>(s.generated_tokens), s.decode_seconds,
                 s.decode_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.decode_seconds : 0.0,
                 where.c_str(), cpu.c_str());
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  add_cpu_options(cmd, &args->cpu);
  cmd->add_option("-m,--model", args->model, "GGUF model file (default: the set-up's SmolLM2-135M-Instruct)");
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text (empty: start from BOS)");
  cmd->add_option("-n,--max-tokens", args->max_tokens, "Most tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature,--temp", args->temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", args->top_k, "Keep the k most likely tokens; 0 is off")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling mass; 1 is off")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", args->min_p, "Drop tokens below min-p times the top probability")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", args->repeat_penalty, "Repetition penalty; 1 is off");
  cmd->add_option("--seed", args->seed, "Sampling seed");
  cmd->add_option("-t,--threads", args->threads, "Worker threads (0: all hardware threads)");
  cmd->add_option("-c,--ctx", args->ctx, "Context length (0: the model's, capped at 4096)");
  cmd->add_option("--isa", args->isa, "Force the kernel path: scalar, avx2 or avx512");
  add_quantize_option(cmd, &args->quantize);
  add_lora_options(cmd, &args->lora);
  cmd->add_option("--device", args->device, "Where the layers run: cpu, cuda or cuda:N");
  cmd->add_option("--kv-type", args->kv_type, "KV cache element type: f32, f16, bf16 or q8_0 (default f32)");
  cmd->add_option("--gpu-layers,-g", args->gpu_layers,
                  "Put the last N layers (and the output head) on the GPU, the rest on the CPU")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-bos", args->no_bos, "Do not add BOS before the prompt");
  cmd->add_flag("--json", args->json, "Constrain the output to a JSON object");
  cmd->add_option("--json-schema,-j", args->json_schema,
                  "Constrain the output to a JSON schema, given inline or as @FILE");
  cmd->add_option("--grammar", args->grammar, "Constrain the output to a GBNF grammar (llama.cpp's notation)");
  cmd->add_option("--grammar-file", args->grammar_file, "Constrain the output to the GBNF grammar in a file");
  cmd->add_flag("!--no-stats", args->stats, "Do not print timing to stderr");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace troupe::cli
