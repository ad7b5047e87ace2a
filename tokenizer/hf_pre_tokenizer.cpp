// The pre-tokenizers of hf_pre_tokenizer.hpp, following the rules of Hugging
// Face's `tokenizers`: a pattern cuts a piece into alternating match and
// non-match spans, the behaviour decides what becomes a piece, and empty
// pieces are dropped.
#include "tokenizer/hf_pre_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/unicode_classes.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe::hf {
namespace {

struct Piece {
  std::string text;
  bool at_start;  // begins the caller's input
};

struct Part {
  size_t begin;
  size_t end;
  bool match;
};

// The spans of text, matches and the text between them, in order.
std::vector<Part> parts_of(std::string_view text, const std::vector<Regex::Span>& matches, bool invert) {
  std::vector<Part> parts;
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > last) parts.push_back({last, begin, invert});
    parts.push_back({begin, end, !invert});
    last = end;
  }
  if (last < text.size()) parts.push_back({last, text.size(), invert});
  return parts;
}

// Folds the parts as the behaviour says; the results are plain spans.
std::vector<Part> apply_behavior(const std::vector<Part>& parts, SplitBehavior behavior) {
  std::vector<Part> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::isolated:
      return parts;
    case SplitBehavior::removed:
      for (const Part& p : parts) {
        if (!p.match) out.push_back(p);
      }
      return out;
    case SplitBehavior::merged_with_previous:
      // A match joins the piece before it (unless that piece was a match).
      for (const Part& p : parts) {
        if (p.match && !previous_match && !out.empty()) out.back().end = p.end;
        else out.push_back(p);
        previous_match = p.match;
      }
      return out;
    case SplitBehavior::merged_with_next:
      // A match joins the piece after it (unless that piece is a match).
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !previous_match && !out.empty()) out.back().begin = it->begin;
        else out.push_back(*it);
        previous_match = it->match;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::contiguous:
      // Runs of matches, and runs of non-matches, each become one piece.
      for (const Part& p : parts) {
        if (!out.empty() && p.match == previous_match) out.back().end = p.end;
        else out.push_back(p);
        previous_match = p.match;
      }
      return out;
  }
  return out;
}

// The parts of text when every character with in_class(cp) is a match.
std::vector<Part> char_class_parts(std::string_view text, bool (*in_class)(char32_t)) {
  std::vector<Part> parts;
  size_t run = 0;  // start of the current run of other characters
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::sequence_length(text, pos);
    if (len == 0) throw Error(Errc::internal, "tokenizer: pre-tokenizer input is not valid UTF-8");
    if (in_class(utf8::decode_at(text, pos, len))) {
      if (pos > run) parts.push_back({run, pos, false});
      parts.push_back({pos, pos + len, true});
      run = pos + len;
    }
    pos += len;
  }
  if (run < text.size()) parts.push_back({run, text.size(), false});
  return parts;
}

void literal_matches(std::string_view text, std::string_view pattern, std::vector<Regex::Span>& out) {
  if (pattern.empty()) return;
  size_t pos = 0;
  while ((pos = text.find(pattern, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + pattern.size());
    pos += pattern.size();
  }
}

// s = prefix + s. (std::string::insert at 0 trips GCC 12's false -Wrestrict
// warning at -O3.)
void prepend_to(std::string& s, std::string_view prefix) {
  std::string out;
  out.reserve(prefix.size() + s.size());
  out.append(prefix);
  out.append(s);
  s = std::move(out);
}

std::string to_byte_alphabet(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  for (const char c : s) utf8::append(out, byte_level::byte_to_char()[static_cast<uint8_t>(c)]);
  return out;
}

}  // namespace

// A step ready to run: its pattern compiled once.
struct PreTokenizer::Step {
  PreTokenizerStep spec;
  std::unique_ptr<Regex> regex;  // Split with a regex, ByteLevel with use_regex, Digits
  SplitBehavior behavior = SplitBehavior::isolated;

  void split(const Piece& piece, std::vector<Piece>& out) const {
    if (const auto* bl = std::get_if<ByteLevelStep>(&spec)) {
      Piece p = piece;
      if (bl->add_prefix_space && (p.text.empty() || p.text.front() != ' ')) prepend_to(p.text, " ");
      if (regex == nullptr) {
        out.push_back(std::move(p));
        return;
      }
      cut(p, *regex, false, out);
      return;
    }
    if (const auto* ms = std::get_if<MetaspaceStep>(&spec)) {
      Piece p{replace_all(piece.text, " ", ms->replacement), piece.at_start};
      const bool prepend = ms->prepend_scheme == PrependScheme::always ||
                           (ms->prepend_scheme == PrependScheme::first && p.at_start);
      if (prepend && p.text.compare(0, ms->replacement.size(), ms->replacement) != 0) {
        prepend_to(p.text, ms->replacement);
      }
      if (!ms->split) {
        out.push_back(std::move(p));
        return;
      }
      std::vector<Regex::Span> matches;
      literal_matches(p.text, ms->replacement, matches);
      emit(p, parts_of(p.text, matches, false), SplitBehavior::merged_with_next, out);
      return;
    }
    if (const auto* sp = std::get_if<SplitStep>(&spec)) {
      if (regex != nullptr) {
        cut(piece, *regex, sp->invert, out);
        return;
      }
      std::vector<Regex::Span> matches;
      literal_matches(piece.text, sp->pattern, matches);
      emit(piece, parts_of(piece.text, matches, sp->invert), behavior, out);
      return;
    }
    if (const auto* cc = std::get_if<CharClassStep>(&spec)) {
      if (cc->kind == CharClassStep::Kind::punctuation) {
        emit(piece, char_class_parts(piece.text, unicode::is_punctuation), cc->behavior, out);
        return;
      }
      if (cc->kind == CharClassStep::Kind::whitespace_split) {
        emit(piece, char_class_parts(piece.text, unicode::is_whitespace), SplitBehavior::removed, out);
        return;
      }
      std::vector<Piece> words;
      emit(piece, char_class_parts(piece.text, unicode::is_whitespace), SplitBehavior::removed, words);
      for (const Piece& w : words) {
        emit(w, char_class_parts(w.text, unicode::is_punctuation), SplitBehavior::isolated, out);
      }
      return;
    }
    cut(piece, *regex, false, out);  // Digits
  }

  void cut(const Piece& piece, const Regex& re, bool invert, std::vector<Piece>& out) const {
    std::vector<Regex::Span> matches;
    re.find_all(piece.text, matches);
    emit(piece, parts_of(piece.text, matches, invert), behavior, out);
  }

  static void emit(const Piece& piece, const std::vector<Part>& parts, SplitBehavior how, std::vector<Piece>& out) {
    for (const Part& p : apply_behavior(parts, how)) {
      if (p.end > p.begin) out.push_back({piece.text.substr(p.begin, p.end - p.begin), piece.at_start && p.begin == 0});
    }
  }
};

// Rust regex: \w is Alphabetic, marks, Nd, Pc and Join_Control; \s is White_Space.
const char* const kWhitespacePattern = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+)"
                                       R"(|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\p{White_Space}]+)";

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps, std::vector<std::string> names) {
  for (size_t i = 0; i < steps.size(); ++i) {
    auto step = std::make_unique<Step>();
    step->spec = std::move(steps[i]);
    const std::string where = i < names.size() ? names[i] : "pre-tokenizer step " + std::to_string(i);
    if (const auto* bl = std::get_if<ByteLevelStep>(&step->spec)) {
      if (i + 1 != steps.size()) {
        throw Error(Errc::unsupported, where + ": ByteLevel is supported only as the last pre-tokenizer step");
      }
      if (bl->use_regex) {
        step->regex = std::make_unique<Regex>(troupe::PreTokenizer::gpt2_pattern(), where, Errc::internal);
      }
      byte_level_ = true;
    } else if (const auto* sp = std::get_if<SplitStep>(&step->spec)) {
      step->behavior = sp->behavior;
      if (sp->regex) step->regex = std::make_unique<Regex>(sp->pattern, where + ": Split pattern", Errc::unsupported);
    } else if (const auto* dg = std::get_if<DigitsStep>(&step->spec)) {
      // Rust's char::is_numeric is the N* categories, PCRE2's \p{N}.
      step->regex = std::make_unique<Regex>(R"(\p{N})", where, Errc::internal);
      step->behavior = dg->individual_digits ? SplitBehavior::isolated : SplitBehavior::contiguous;
    }
    steps_.push_back(std::move(step));
  }
}

std::vector<std::string> PreTokenizer::split(std::string_view text, bool at_text_start) const {
  std::vector<Piece> pieces;
  if (!text.empty()) pieces.push_back({std::string(text), at_text_start});
  std::vector<Piece> next;
  for (const auto& step : steps_) {
    next.clear();
    for (const Piece& piece : pieces) step->split(piece, next);
    pieces.swap(next);
  }
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) out.push_back(byte_level_ ? to_byte_alphabet(p.text) : std::move(p.text));
  return out;
}

}  // namespace troupe::hf
