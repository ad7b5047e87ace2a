// tokenizer.json's Precompiled normalizer: SentencePiece's compiled
// normalization rules (nmt_nfkc and friends), a Darts double-array trie over
// UTF-8 byte strings whose values are offsets into NUL-separated replacement
// strings. Applied as Hugging Face's `tokenizers` applies it, which is not
// quite as SentencePiece does (see normalize()).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::hf {

class PrecompiledCharsmap {
 public:
  // blob: the decoded precompiled_charsmap, laid out as uint32 trie_size
  // (little-endian, in bytes), trie_size / 4 trie units, then the replacement
  // strings. Throws Error(bad_format), its message starting with `where`,
  // when the blob is shorter than its trie or the strings are not UTF-8.
  PrecompiledCharsmap(std::string_view blob, const std::string& where);

  // Per extended grapheme cluster of text (valid UTF-8): a cluster under six
  // bytes whose bytes start with a trie key becomes the replacement of the
  // shortest such key, the rest of the cluster dropped; otherwise each
  // character is replaced by its own key's replacement, or kept. (Hugging
  // Face's rule; SentencePiece takes the longest key at every byte.)
  std::string normalize(std::string_view text) const;

  // The replacement of the shortest trie key that prefixes chunk, if any.
  // Malformed tries (offsets outside the array) match nothing.
  std::optional<std::string_view> transform(std::string_view chunk) const;

 private:
  std::vector<uint32_t> units_;  // [trie_size / 4] the double array
  std::string normalized_;       // replacement strings, each ended by NUL
};

// Standard base64 with padding, as Rust's base64 STANDARD engine decodes it
// (no whitespace, unused bits of the last symbol zero); nullopt if malformed.
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace troupe::hf
