// A tokenizer's vocabulary as the byte trie output grammars walk
// (grammar/token_trie.hpp): each token's raw bytes; control tokens are
// never text; end-of-generation tokens end a constrained output.
#pragma once

#include <memory>

#include "grammar/token_trie.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

std::shared_ptr<const grammar::TokenTrie> vocab_trie(const Tokenizer& tokenizer);

}  // namespace troupe
