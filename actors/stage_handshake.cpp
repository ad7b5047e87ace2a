// Handshake texts and the fit check (nlohmann-json; the hello is read
// leniently so that a head of another version still gets its sentence).
#include "actors/stage_handshake.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace troupe {
namespace {

using nlohmann::json;

json to_json(const StageFacts& f) {
  return json{{"model_id", f.model_id},
              {"model_name", f.model_name},
              {"layers", {f.first_layer, f.last_layer}},
              {"kv", {{"blocks", f.kv_blocks}, {"block_size", f.kv_block_size}, {"dtype", f.kv_dtype}}},
              {"max_tokens", f.max_tokens},
              {"max_seqs", f.max_seqs},
              {"state_slots", f.state_slots},
              {"embedding_output", f.embedding_output},
              {"device", f.device}};
}

StageFacts from_json(const json& j) {
  StageFacts f;
  f.model_id = j.at("model_id").get<std::string>();
  f.model_name = j.value("model_name", std::string());
  const json& layers = j.at("layers");
  f.first_layer = layers.at(0).get<int64_t>();
  f.last_layer = layers.at(1).get<int64_t>();
  const json& kv = j.at("kv");
  f.kv_blocks = kv.at("blocks").get<int32_t>();
  f.kv_block_size = kv.at("block_size").get<int32_t>();
  f.kv_dtype = kv.at("dtype").get<std::string>();
  f.max_tokens = j.at("max_tokens").get<int64_t>();
  f.max_seqs = j.at("max_seqs").get<int64_t>();
  f.state_slots = j.value("state_slots", int64_t{0});
  f.embedding_output = j.value("embedding_output", false);
  f.device = j.value("device", std::string());
  return f;
}

std::string layer_range(int64_t a, int64_t b) {
  std::string out = "[";  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "[" + std::string
  out += std::to_string(a);
  out += ", ";
  out += std::to_string(b);
  out += ")";
  return out;
}

std::string kv_text(const StageFacts& f) {
  return std::to_string(f.kv_blocks) + " KV blocks of " + std::to_string(f.kv_block_size) + " tokens (" +
         f.kv_dtype + ")";
}

// Equal strings in time that does not depend on where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

std::string hello_json(const StageFacts& head, const std::string& secret) {
  json j = to_json(head);
  j["secret"] = secret;
  return j.dump();
}

std::string facts_json(const StageFacts& facts) { return to_json(facts).dump(); }

std::string refusal_json(const std::string& sentence) { return json{{"error", sentence}}.dump(); }

std::string refusal_sentence(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto it = j.is_object() ? j.find("error") : j.end();
  return it != j.end() && it->is_string() ? it->get<std::string>() : "no reason given";
}

StageFacts parse_facts(const std::string& text) {
  try {
    return from_json(json::parse(text));
  } catch (const std::exception& e) {
    throw Error(Errc::bad_format, std::string("stage handshake: not a facts object: ") + e.what());
  }
}

std::string check_hello(uint32_t head_version, const std::string& hello, const StageFacts& w,
                        const std::string& worker_secret, uint32_t worker_version) {
  json j;
  try {
    j = json::parse(hello);
  } catch (const std::exception&) {
    return "the hello is not JSON (head speaks protocol " + std::to_string(head_version) + ", worker " +
           std::to_string(worker_version) + ")";
  }
  // The secret before anything else: a head without it learns nothing more.
  if (!worker_secret.empty()) {
    const auto it = j.find("secret");
    if (it == j.end() || !it->is_string() || !same_secret(it->get<std::string>(), worker_secret)) {
      return "wrong or missing secret (the worker requires --secret or TROUPE_STAGE_SECRET)";
    }
  }
  if (head_version != worker_version) {
    return "protocol version differs: the head speaks Troupe stage protocol " + std::to_string(head_version) +
           ", the worker speaks " + std::to_string(worker_version);
  }
  StageFacts h;
  try {
    h = from_json(j);
  } catch (const std::exception& e) {
    return std::string("the hello lacks a field: ") + e.what();
  }
  if (h.model_id != w.model_id) {
    std::string why = "model differs: the head has " + h.model_name + " (id " + h.model_id + "), the worker has " +
                      w.model_name + " (id " + w.model_id + ")";
    // One file under two names is rare; one file loaded with two --quantize
    // settings, other LoRA adapters (or, for a LongRoPE model, two --ctx) is
    // the likely mistake.
    if (h.model_name == w.model_name) why += "; give the worker the head's --quantize and --lora (and --ctx)";
    return why;
  }
  if (h.first_layer != w.first_layer || h.last_layer != w.last_layer) {
    return "layer range differs: the head expects layers " + layer_range(h.first_layer, h.last_layer) +
           " of this stage, the worker holds " + layer_range(w.first_layer, w.last_layer);
  }
  if (h.kv_blocks != w.kv_blocks || h.kv_block_size != w.kv_block_size || h.kv_dtype != w.kv_dtype) {
    return "KV geometry differs: the head has " + kv_text(h) + ", the worker " + kv_text(w);
  }
  if (h.max_tokens > w.max_tokens || h.max_seqs > w.max_seqs) {
    return "step limits differ: the head sends up to " + std::to_string(h.max_tokens) + " tokens and " +
           std::to_string(h.max_seqs) + " sequences a step, the worker holds " + std::to_string(w.max_tokens) +
           " and " + std::to_string(w.max_seqs);
  }
  if (h.embedding_output != w.embedding_output) {
    return std::string("output differs: the head ") + (h.embedding_output ? "serves embeddings" : "generates") +
           ", the worker " + (w.embedding_output ? "serves embeddings" : "generates") +
           " (give both --embedding, or neither)";
  }
  if (h.state_slots > w.state_slots) {
    return "recurrent state differs: the head runs up to " + std::to_string(h.state_slots) +
           " sequences at once, the worker holds state for " + std::to_string(w.state_slots) +
           " (give the worker --state-slots " + std::to_string(h.state_slots) + ")";
  }
  return {};
}

}  // namespace troupe
