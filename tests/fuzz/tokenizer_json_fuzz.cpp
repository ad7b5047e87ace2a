// libFuzzer target for tokenizer.json (tokenizer/hf_*): the input is a
// tokenizer.json, then a NUL byte, then a text. The file either builds a
// tokenizer or fails with troupe::Error; a tokenizer then encodes the text
// to ids inside its vocabulary, and decodes those ids and ids made from the
// text's bytes without failing (any id in range decodes).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tests/fuzz/fuzz_util.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [json, text] = split(as_text(data, size), std::string_view("\0", 1));
  std::unique_ptr<troupe::Tokenizer> tok;
  try {
    tok = troupe::tokenizer_from_hf_json(json);
  } catch (const troupe::Error& e) {
    refused(e);
    return 0;
  }
  const int32_t n_vocab = tok->n_vocab();
  check(n_vocab > 0);
  for (const bool special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = tok->encode(text, special, special);
    } catch (const troupe::Error& e) {
      // Only invalid UTF-8 text may be refused.
      check(e.code() == troupe::Errc::invalid_argument);
      continue;
    }
    for (const int32_t id : ids) check(id >= 0 && id < n_vocab);
    (void)tok->decode(ids, special);
  }
  // Arbitrary in-range ids, e.g. what a model samples.
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < text.size() && ids.size() < 256; i += 2) {
    ids.push_back(static_cast<int32_t>((static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1])) %
                                       n_vocab));
  }
  (void)tok->decode(ids, false);
  (void)tok->decode(ids, true);
  return 0;
}
