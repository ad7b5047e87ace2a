// Helpers of the grammar tests: whether a grammar accepts a whole text, and
// an expected refusal with the words its message must hold.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "grammar/matcher.hpp"

namespace troupe::grammar::test {

inline bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.can_end();
}

// compile(input) must throw Error(invalid_argument) saying `words`.
template <class Compile>
void expect_refused(Compile compile, const std::string& input, const std::string& words) {
  try {
    compile(input);
    ADD_FAILURE() << "accepted: " << input;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

}  // namespace troupe::grammar::test
