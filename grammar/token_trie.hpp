// The vocabulary as a byte trie in preorder, built once per tokenizer and
// shared by every constrained request: a mask walks it depth first and
// skips a whole subtree the moment its first byte is refused, so a JSON
// state that allows one byte touches a handful of nodes, not the vocab.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::grammar {

class TokenTrie {
 public:
  // token_bytes: [n_vocab] the raw bytes of each token. Tokens with no
  // bytes, and those `text_token` marks false (control tokens, end tokens),
  // are left out: no grammar allows them by their text. end_tokens: ids
  // that end the output (allowed where the grammar may end).
  TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& text_token,
            std::vector<int32_t> end_tokens);

  int32_t n_vocab() const { return n_vocab_; }
  size_t n_nodes() const { return byte_.size(); }
  // Preorder arrays, node 0 the root (no byte).
  uint8_t byte(size_t node) const { return byte_[node]; }
  int32_t depth(size_t node) const { return depth_[node]; }
  size_t subtree_end(size_t node) const { return end_[node]; }  // one past the node's last descendant
  // Tokens spelled by exactly the path to `node`.
  const int32_t* tokens_begin(size_t node) const { return tokens_.data() + tok_begin_[node]; }
  const int32_t* tokens_end(size_t node) const { return tokens_.data() + tok_begin_[node + 1]; }
  int32_t max_depth() const { return max_depth_; }

  // A token's bytes when it is in the trie; false for the others.
  bool is_text(int32_t token) const { return token >= 0 && token < n_vocab_ && in_trie_[static_cast<size_t>(token)]; }
  const std::string& bytes(int32_t token) const { return bytes_[static_cast<size_t>(token)]; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  bool is_end(int32_t token) const;

 private:
  int32_t n_vocab_ = 0;
  int32_t max_depth_ = 0;
  std::vector<std::string> bytes_;
  std::vector<bool> in_trie_;
  std::vector<int32_t> end_tokens_;  // sorted
  std::vector<uint8_t> byte_;
  std::vector<int32_t> depth_;
  std::vector<size_t> end_;
  std::vector<uint32_t> tok_begin_;  // [n_nodes + 1]
  std::vector<int32_t> tokens_;
};

}  // namespace troupe::grammar
