// libFuzzer target for GBNF grammars (grammar/gbnf.cpp), llama.cpp's
// `grammar` field: the input is a grammar, then "\n---\n", then a text fed
// to the matcher byte by byte. A grammar either compiles or fails with
// troupe::Error; the walk agrees with next_bytes() at every byte.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "grammar/gbnf.hpp"
#include "grammar/matcher.hpp"
#include "tests/fuzz/fuzz_util.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [text, input] = split(as_text(data, size), "\n---\n");
  std::shared_ptr<const troupe::grammar::Grammar> g;
  try {
    g = troupe::grammar::gbnf_grammar(text);
  } catch (const troupe::Error& e) {
    refused(e);
    return 0;
  }
  try {
    troupe::grammar::Matcher m(g);
    for (char c : input) {
      const bool could = m.next_bytes().has(static_cast<uint8_t>(c));
      const bool took = m.accept(std::string_view(&c, 1));
      check(could == took);
      if (!took) break;
    }
  } catch (const troupe::Error& e) {
    refused(e);  // a grammar too ambiguous or too deep for the matcher's limits
  }
  return 0;
}
