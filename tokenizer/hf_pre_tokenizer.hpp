// tokenizer.json pre-tokenizers: cut normalized text into the pieces the BPE
// model merges within. Supported: Split (regex or string, every behaviour,
// invert), ByteLevel (prefix space, GPT-2's regex, the byte alphabet),
// Metaspace (prepend schemes, split), Digits, BertPreTokenizer, Whitespace,
// WhitespaceSplit, Punctuation, and a Sequence of these.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::hf {

// What a Split does with the matches of its pattern (Hugging Face's
// SplitDelimiterBehavior).
enum class SplitBehavior { isolated, removed, merged_with_previous, merged_with_next, contiguous };
// When Metaspace puts the replacement character before a piece.
enum class PrependScheme { first, always, never };

struct SplitStep {
  std::string pattern;
  bool regex = true;  // false: pattern is plain text
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;  // the pieces between matches count as the matches
};
struct ByteLevelStep {
  bool add_prefix_space = false;  // a space before every piece that lacks one
  bool use_regex = true;          // split with GPT-2's pattern first
};
struct MetaspaceStep {
  std::string replacement = "\xE2\x96\x81";  // "▁" stands for a space
  PrependScheme prepend_scheme = PrependScheme::always;
  bool split = true;  // cut before each replacement character
};
struct DigitsStep {
  bool individual_digits = false;  // each digit alone, else runs of digits
};
// Cuts at characters of a class (unicode_classes.hpp), each such character a
// match of its own: BertPreTokenizer removes whitespace, then isolates
// punctuation; WhitespaceSplit removes whitespace; Punctuation splits at
// punctuation as its behaviour says.
struct CharClassStep {
  enum class Kind { bert, whitespace_split, punctuation };
  Kind kind = Kind::bert;
  SplitBehavior behavior = SplitBehavior::isolated;  // punctuation only
};
using PreTokenizerStep = std::variant<SplitStep, ByteLevelStep, MetaspaceStep, DigitsStep, CharClassStep>;

// Hugging Face's Whitespace pre-tokenizer, \w+|[^\w\s]+ with Rust regex's
// Unicode classes spelled out for PCRE2, as a SplitStep's pattern (inverted,
// removed).
extern const char* const kWhitespacePattern;

class PreTokenizer {
 public:
  PreTokenizer();  // the whole text is one piece
  // Throws Error(unsupported) when a regex does not compile with PCRE2 or a
  // ByteLevel step is not the last (its byte alphabet would reach later
  // steps). where[i], if given, names step i in messages.
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps, std::vector<std::string> where = {});
  // From the JSON of a tokenizer.json "pre_tokenizer" value (null: none).
  static PreTokenizer from_json(std::string_view json_text);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The pieces of text, as the model sees them (byte-level: in GPT-2's byte
  // alphabet). at_text_start: text begins the caller's input, which is where
  // Metaspace's "first" scheme prepends. text must be valid UTF-8.
  std::vector<std::string> split(std::string_view text, bool at_text_start) const;

  // The last step is ByteLevel: pieces are spelled in the byte alphabet.
  bool byte_level() const { return byte_level_; }

 private:
  struct Step;
  std::vector<std::unique_ptr<Step>> steps_;
  bool byte_level_ = false;
};

}  // namespace troupe::hf
