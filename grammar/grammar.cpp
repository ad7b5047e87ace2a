// Grammar building, the checks that keep the matcher's expansion finite,
// and the flat layout the matcher walks.
#include "grammar/grammar.hpp"

#include "core/error.hpp"

namespace troupe::grammar {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error(Errc::invalid_argument, "grammar: " + what); }

}  // namespace

int32_t Grammar::declare(std::string name) {
  if (rules_.size() >= kMaxRules) fail("more than " + std::to_string(kMaxRules) + " rules");
  rules_.emplace_back();
  names_.push_back(std::move(name));
  return static_cast<int32_t>(rules_.size() - 1);
}

void Grammar::define(int32_t rule, std::vector<Alternative> alts) {
  for (const Alternative& a : alts) n_symbols_ += a.size() + 1;
  check_size();
  rules_.at(static_cast<size_t>(rule)) = std::move(alts);
}

int32_t Grammar::add(std::string name, std::vector<Alternative> alts) {
  const int32_t r = declare(std::move(name));
  define(r, std::move(alts));
  return r;
}

void Grammar::check_size() const {
  if (n_symbols_ > kMaxSymbols) fail("more than " + std::to_string(kMaxSymbols) + " symbols");
}

Symbol Grammar::byte(uint8_t c) {
  ByteSet s;
  s.add(c);
  return bytes(s);
}

Symbol Grammar::range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.add_range(lo, hi);
  return bytes(s);
}

void Grammar::append_literal(Alternative& alt, std::string_view text) {
  for (char c : text) alt.push_back(byte(static_cast<uint8_t>(c)));
}

Alternative Grammar::literal(std::string_view text) {
  Alternative a;
  append_literal(a, text);
  return a;
}

Symbol Grammar::rep(const Alternative& body, int32_t min, int32_t max, const std::string& name) {
  if (min < 0 || (max >= 0 && max < min)) fail("repetition {" + std::to_string(min) + "," + std::to_string(max) + "} of " + name);
  // The optional tail: unbounded -> T ::= body T | ""; bounded -> a chain
  // T_k ::= body T_{k-1} | "" of max - min links.
  int32_t tail = -1;
  if (max < 0) {
    tail = declare(name + "*");
    Alternative more = body;
    more.push_back(ref(tail));
    define(tail, {std::move(more), {}});
  } else {
    for (int32_t k = 0; k < max - min; ++k) {
      const int32_t t = declare(name + "?" + std::to_string(k));
      Alternative more = body;
      if (tail >= 0) more.push_back(ref(tail));
      define(t, {std::move(more), {}});
      tail = t;
    }
  }
  Alternative whole;
  for (int32_t k = 0; k < min; ++k) {
    whole.insert(whole.end(), body.begin(), body.end());
    if (whole.size() > kMaxSymbols) fail(name + " repeats more than the grammar's symbol limit allows");
  }
  if (tail >= 0) whole.push_back(ref(tail));
  return ref(add(name + "{" + std::to_string(min) + "," + std::to_string(max) + "}", {std::move(whole)}));
}

std::vector<bool> Grammar::nullable_rules() const {
  // A fixed point: a rule is nullable when one alternative is all nullable
  // references (a byte set always consumes).
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& a : rules_[r]) {
        bool all = true;
        for (const Symbol& s : a) all = all && s.rule >= 0 && nullable[static_cast<size_t>(s.rule)];
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

void Grammar::check_left_recursion(const std::vector<bool>& nullable) const {
  // Edges r -> s where s can start r's expansion without a byte consumed
  // (s after nothing but nullable references). A cycle is left recursion;
  // found by a depth-first search with colours.
  const size_t n = rules_.size();
  std::vector<std::vector<int32_t>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Alternative& a : rules_[r]) {
      for (const Symbol& s : a) {
        if (s.rule < 0) break;
        edges[r].push_back(s.rule);
        if (!nullable[static_cast<size_t>(s.rule)]) break;
      }
    }
  }
  std::vector<uint8_t> colour(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<int32_t, size_t>> stack;
  for (size_t start = 0; start < n; ++start) {
    if (colour[start] != 0) continue;
    stack.emplace_back(static_cast<int32_t>(start), 0);
    colour[start] = 1;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      const auto& out = edges[static_cast<size_t>(r)];
      if (next == out.size()) {
        colour[static_cast<size_t>(r)] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t s = out[next++];
      if (colour[static_cast<size_t>(s)] == 1) {
        fail("rule '" + names_[static_cast<size_t>(s)] + "' is left-recursive (it can reach itself without a byte)");
      }
      if (colour[static_cast<size_t>(s)] == 0) {
        colour[static_cast<size_t>(s)] = 1;
        stack.emplace_back(s, 0);
      }
    }
  }
}

void Grammar::finish(int32_t root) {
  if (root < 0 || static_cast<size_t>(root) >= rules_.size()) fail("no root rule");
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (rules_[r].empty()) fail("rule '" + names_[r] + "' is used but never defined");
    for (const Alternative& a : rules_[r]) {
      for (const Symbol& s : a) {
        if (s.rule >= static_cast<int32_t>(rules_.size())) fail("a reference to an unknown rule in '" + names_[r] + "'");
        if (s.rule < 0 && s.bytes.empty()) fail("rule '" + names_[r] + "' holds an empty byte set");
      }
    }
  }
  check_left_recursion(nullable_rules());
  root_ = root;
  flat_.clear();
  starts_.assign(rules_.size(), {});
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const Alternative& a : rules_[r]) {
      starts_[r].push_back(static_cast<int32_t>(flat_.size()));
      for (const Symbol& s : a) {
        flat_.push_back(FlatSymbol{.rule = s.rule >= 0 ? s.rule : FlatSymbol::kBytes, .bytes = s.bytes});
      }
      flat_.push_back(FlatSymbol{});
    }
  }
}

}  // namespace troupe::grammar
