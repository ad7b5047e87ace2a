// Trie construction from the vocabulary sorted by bytes: in that order a
// token's node is created after its prefixes and before its successors, so
// nodes come out in preorder and each node's tokens are contiguous.
#include "grammar/token_trie.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace troupe::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& text_token,
                     std::vector<int32_t> end_tokens)
    : n_vocab_(static_cast<int32_t>(token_bytes.size())), bytes_(token_bytes), end_tokens_(std::move(end_tokens)) {
  if (text_token.size() != token_bytes.size()) {
    throw Error(Errc::invalid_argument, "token trie: text_token and token_bytes differ in size");
  }
  std::sort(end_tokens_.begin(), end_tokens_.end());
  in_trie_.assign(token_bytes.size(), false);
  std::vector<int32_t> order;
  for (size_t t = 0; t < token_bytes.size(); ++t) {
    if (text_token[t] && !token_bytes[t].empty() && !is_end(static_cast<int32_t>(t))) {
      order.push_back(static_cast<int32_t>(t));
      in_trie_[t] = true;
    }
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const std::string& x = token_bytes[static_cast<size_t>(a)];
    const std::string& y = token_bytes[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });

  auto new_node = [&](uint8_t b, int32_t depth) {
    byte_.push_back(b);
    depth_.push_back(depth);
    end_.push_back(0);
    tok_begin_.push_back(static_cast<uint32_t>(tokens_.size()));
    max_depth_ = std::max(max_depth_, depth);
    return byte_.size() - 1;
  };
  std::vector<size_t> path{new_node(0, 0)};  // path[d]: the node at depth d
  std::string spelled;                       // the bytes of path[1..]
  for (int32_t t : order) {
    const std::string& s = token_bytes[static_cast<size_t>(t)];
    size_t common = 0;
    while (common < spelled.size() && common < s.size() && spelled[common] == s[common]) ++common;
    while (path.size() > common + 1) {
      end_[path.back()] = byte_.size();
      path.pop_back();
    }
    spelled.resize(common);
    for (size_t i = common; i < s.size(); ++i) {
      path.push_back(new_node(static_cast<uint8_t>(s[i]), static_cast<int32_t>(i + 1)));
      spelled.push_back(s[i]);
    }
    tokens_.push_back(t);
  }
  while (!path.empty()) {
    end_[path.back()] = byte_.size();
    path.pop_back();
  }
  tok_begin_.push_back(static_cast<uint32_t>(tokens_.size()));
}

bool TokenTrie::is_end(int32_t token) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), token);
}

}  // namespace troupe::grammar
