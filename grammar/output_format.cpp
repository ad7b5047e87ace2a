// The compile cache: a few dozen grammars by (kind, text), dropped
// wholesale when full (a server sees few distinct schemas at a time).
#include "grammar/output_format.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "core/error.hpp"
#include "grammar/gbnf.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/lazy_token_grammar.hpp"
#include "grammar/tool_call_grammar.hpp"

namespace troupe {
namespace {

constexpr size_t kMaxCached = 64;

// A compiled format: its grammar and, for a lazy tool choice, the trigger
// it waits for (read from the format's text once, here, not per request).
struct Compiled {
  std::shared_ptr<const grammar::Grammar> grammar;
  grammar::LazyTrigger trigger;
};

Compiled compile(const OutputFormat& f) {
  switch (f.kind) {
    case OutputFormat::Kind::json_object:
      return {grammar::json_object_grammar(), {}};
    case OutputFormat::Kind::json_schema:
      return {grammar::json_schema_grammar(f.schema), {}};
    case OutputFormat::Kind::gbnf:
      return {grammar::gbnf_grammar(f.schema), {}};
    case OutputFormat::Kind::choice:
      return {grammar::choice_grammar(f.schema), {}};
    case OutputFormat::Kind::tool_calls:
      return {grammar::tool_call_grammar(f.schema), grammar::tool_call_format_trigger(f.schema)};
    case OutputFormat::Kind::text:
      break;
  }
  throw Error(Errc::invalid_argument, "output format: plain text has no grammar");
}

Compiled compiled(const OutputFormat& format) {
  static std::mutex mu;
  static std::map<std::pair<OutputFormat::Kind, std::string>, Compiled> cache;
  auto key = std::make_pair(format.kind, format.schema);
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  // Compiled outside the lock: a large schema must not stall other requests.
  Compiled c = compile(format);
  std::lock_guard lock(mu);
  if (cache.size() >= kMaxCached) cache.clear();
  cache.emplace(std::move(key), c);
  return c;
}

}  // namespace

std::shared_ptr<const grammar::Grammar> output_grammar(const OutputFormat& format) { return compiled(format).grammar; }

std::unique_ptr<TokenConstraint> token_constraint(const OutputFormat& format,
                                                  std::shared_ptr<const grammar::TokenTrie> trie,
                                                  std::shared_ptr<grammar::MaskCache> cache) {
  Compiled c = compiled(format);
  if (!c.trigger.text.empty()) {
    return std::make_unique<grammar::LazyTokenGrammar>(std::move(c.trigger.text), std::move(c.grammar),
                                                       std::move(trie), std::move(cache), c.trigger.think_open);
  }
  return std::make_unique<grammar::TokenGrammar>(std::move(c.grammar), std::move(trie), std::move(cache));
}

}  // namespace troupe
