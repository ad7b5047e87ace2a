// libFuzzer target for response_format schemas (grammar/json_schema.cpp)
// and the matcher that walks their grammars: the input is a schema, then
// "\n---\n", then a document fed to the matcher byte by byte. A schema
// either compiles or fails with troupe::Error; the walk never crashes and
// never accepts a byte it then cannot account for.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "tests/fuzz/fuzz_util.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [schema, document] = split(as_text(data, size), "\n---\n");
  std::shared_ptr<const troupe::grammar::Grammar> g;
  try {
    g = troupe::grammar::json_schema_grammar(schema);
  } catch (const troupe::Error& e) {
    refused(e);
    return 0;
  }
  try {
    troupe::grammar::Matcher m(g);
    for (char c : document) {
      const bool could = m.next_bytes().has(static_cast<uint8_t>(c));
      const bool took = m.accept(std::string_view(&c, 1));
      check(could == took);  // next_bytes is exactly what accept takes
      if (!took) break;
    }
    if (m.done()) check(m.next_bytes().empty());
  } catch (const troupe::Error& e) {
    refused(e);  // a grammar too ambiguous for the stack limit
  }
  return 0;
}
