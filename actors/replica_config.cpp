// The "replicas" key: each entry is merged over the top level and handed,
// re-serialised, to parse_pipeline_config, so a replica is checked exactly
// like a single topology (one reader, one set of messages).
#include "actors/replica_config.hpp"

#include <nlohmann/json.hpp>

#include "actors/json_reader.hpp"
#include "actors/pipeline_config.hpp"

namespace troupe {
namespace {

using nlohmann::json;

// `over`'s keys win; where both sides hold an object, they merge key by
// key ("scheduler": {"max_batch_size": 8} keeps the top level's other
// scheduler knobs). Unlike RFC 7386, a null is kept (and then refused by
// the topology reader) rather than deleting the key.
json merged(json base, const json& over) {
  for (const auto& [key, value] : over.items()) {
    auto it = base.find(key);
    if (it != base.end() && it->is_object() && value.is_object()) {
      *it = merged(*it, value);
    } else {
      base[key] = value;
    }
  }
  return base;
}

}  // namespace

std::vector<PipelineConfig> parse_replicas(std::string_view text, const std::string& origin) {
  const JsonReader r(origin);
  const json root = r.parse(text);
  if (!root.is_object()) r.fail("", "must be a JSON object");
  const json* list = JsonReader::find(root, "replicas");
  if (list == nullptr) return {};
  if (!list->is_array()) r.wrong_type("replicas", *list, "an array of topology objects");
  if (list->empty()) r.fail("replicas", "must hold at least one replica");

  json base = root;
  base.erase("replicas");
  base.erase("server");
  std::vector<PipelineConfig> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string where = "replicas[" + std::to_string(i) + "]";
    const json& entry = (*list)[i];
    if (!entry.is_object()) r.wrong_type(where, entry, "an object (a topology: stages, kv, scheduler, ...)");
    if (entry.contains("model")) r.fail(where + ".model", "replicas share the top-level \"model\"; set it there");
    if (entry.contains("quantize")) {
      r.fail(where + ".quantize", "replicas share the top-level model and its \"quantize\"; set it there");
    }
    if (entry.contains("server")) r.fail(where + ".server", "the server settings belong at the top level");
    if (entry.contains("replicas")) r.fail(where + ".replicas", "replicas do not nest");
    out.push_back(parse_pipeline_config(merged(base, entry).dump(), origin + ": " + where));
  }
  return out;
}

}  // namespace troupe
