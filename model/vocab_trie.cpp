// One pass over the vocabulary: bytes, text-or-not, end tokens.
#include "model/vocab_trie.hpp"

#include <string>
#include <vector>

namespace troupe {

std::shared_ptr<const grammar::TokenTrie> vocab_trie(const Tokenizer& tokenizer) {
  const auto n = static_cast<size_t>(tokenizer.n_vocab());
  std::vector<std::string> bytes(n);
  std::vector<bool> text(n);
  std::vector<int32_t> ends;
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    text[i] = !tokenizer.is_special(id);
    if (text[i]) bytes[i] = tokenizer.token_to_bytes(id);
    if (tokenizer.is_eog(id)) ends.push_back(id);
  }
  return std::make_shared<const grammar::TokenTrie>(bytes, text, std::move(ends));
}

}  // namespace troupe
