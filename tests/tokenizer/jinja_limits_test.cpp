// The limits on rendering an untrusted chat template (tokenizer/jinja_limits.hpp),
// each hit by a hostile template: every one must end in a clear
// Error(invalid_argument) naming the limit, never a hang, a crash or an
// out-of-memory kill. And a template sees only the variables it is given.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pthread.h>

#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/jinja_limits.hpp"

namespace troupe {
namespace {

using ojson = nlohmann::ordered_json;

std::string render_limited(std::string_view source, const ojson& vars = ojson::object()) {
  return ChatTemplate::parse(source).render_with(vars);
}

// The message of the error a template raises when rendered; fails the test
// when it renders, or fails with another code.
std::string limit_error_of(std::string_view source, const ojson& vars = ojson::object()) {
  try {
    render_limited(source, vars);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << source;
  return {};
}

#define EXPECT_HAS(text, part)                        \
  do {                                                \
    const std::string t_ = (text);                    \
    EXPECT_NE(t_.find(part), std::string::npos) << t_; \
  } while (0)

TEST(JinjaLimits, AHugeRangeFailsAtOnce) {
  // range(10**9) never makes its billion items: the 100001st is refused.
  EXPECT_HAS(limit_error_of("{% for i in range(10**9) %}{{ i }}{% endfor %}"),
             ("range too big: chat templates may make at most 100000 items"));
  EXPECT_HAS(limit_error_of("{{ range(-5, 10**18)|length }}"), ("range too big"));
}

TEST(JinjaLimits, NestedLoopsRunOutOfSteps) {
  // 10^10 iterations from ranges that are each within their limit.
  EXPECT_HAS(limit_error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
             ("template ran too long"));
}

TEST(JinjaLimits, SlowStepsRunOutOfTime) {
  // Few steps, each slow (a 1 MB replace): the deadline, not the step count, ends it.
  EXPECT_HAS(
      limit_error_of("{% for i in range(100000) %}{% set s = ('x' * 1000000)|replace('x', 'yz') %}{% endfor %}"),
      "template ran too long: over " + std::to_string(static_cast<int>(jinja::kMaxRenderSeconds * 1000)) + " ms");
}

TEST(JinjaLimits, RecursionDepth) {
  // 1000 levels, or the stack the render may use where a level's frames are
  // large (a sanitizer build), whichever comes first.
  EXPECT_HAS(limit_error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
             ("template recursion is too deep ("));
  // Within the limit, recursion works.
  EXPECT_EQ(render_limited("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"),
            "54321");
}

// What rendering source on a thread of a 256 KiB stack gives: its output,
// or "error: " and the message.
std::string render_on_small_stack(const std::string& source) {
  struct Run {
    const std::string* source;
    std::string what;
    static void* main(void* arg) {
      auto* run = static_cast<Run*>(arg);
      try {
        run->what = render_limited(*run->source);
      } catch (const Error& e) {
        run->what = std::string("error: ") + e.what();
      }
      return nullptr;
    }
  } run{.source = &source, .what = {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{256} << 10);
  pthread_t thread;
  if (pthread_create(&thread, &attr, &Run::main, &run) != 0) {
    ADD_FAILURE() << "cannot start a thread";
  } else {
    pthread_join(thread, nullptr);
  }
  pthread_attr_destroy(&attr);
  return run.what;
}

// A macro that recurses without progress (the fuzzer's input, kept in
// tests/fuzz/regressions/jinja_template/: it overflowed the 8 MB stack of
// the fuzzer's -O0 sanitizer build before 1000 levels), rendered on a
// thread of a small stack (256 KiB, where 1000 levels do not fit either):
// the stack bound ends it with the same clear error.
TEST(JinjaLimits, RecursionOnASmallStack) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) +
                   "/../fuzz/regressions/jinja_template/macro_recursion_without_progress.jinja");
  ASSERT_TRUE(in) << "regression file missing";
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_NE(source.find("count(n - 0)"), std::string::npos);
  EXPECT_HAS(render_on_small_stack(source), "template recursion is too deep (over ");
}

// Values nested 100000 deep: made and dropped with a flat stack (their
// deletion used to recurse once per level), and printing or comparing them
// stops at 512 levels, or at the render's stack (a small one here), with an
// error, as tojson does. A namespace that holds itself prints the same
// error instead of recursing forever.
TEST(JinjaLimits, DeeplyNestedValues) {
  const std::string nest =
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}";
  EXPECT_EQ(render_on_small_stack(nest + "made"), "made");
  EXPECT_HAS(render_on_small_stack(nest + "{{ ns.x }}"), "str: value nested too deeply (");
  EXPECT_HAS(render_on_small_stack(nest + "{{ ns.x == ns.x }}"), "==: value nested too deeply");
  EXPECT_HAS(render_on_small_stack(nest + "{{ ns.x < ns.x }}"), "value nested too deeply");
  EXPECT_HAS(render_on_small_stack(nest + "{{ ns.x|tojson }}"), "tojson: value nested too deeply");
  EXPECT_HAS(limit_error_of("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}"),
             "str: value nested too deeply (more than 512 levels)");
  // Nesting within the bound prints as Python does.
  EXPECT_EQ(render_limited("{{ [[1, [2]], {'a': [3]}] }}"), "[[1, [2]], {'a': [3]}]");
}

TEST(JinjaLimits, OutputBytes) {
  EXPECT_HAS(limit_error_of("{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}"),
             "template output is over the limit of 67108864 bytes");
  EXPECT_HAS(limit_error_of("{{ 'x' * 100000000000 }}"), "repetition result is too large");
}

TEST(JinjaSandbox, OnlyTheGivenContextIsVisible) {
  const ojson vars = {{"messages", ojson::array({{{"role", "user"}, {"content", "hi"}}})}};
  // Python internals are not attributes of anything: undefined, which prints as nothing.
  for (const char* probe : {"{{ ''.__class__ }}", "{{ messages.__class__ }}", "{{ namespace.__init__ }}",
                            "{{ range.__globals__ }}", "{{ messages[0].__dict__ }}", "{{ (1).__add__ }}"}) {
    std::string out;
    try {
      out = render_limited(probe, vars);
    } catch (const Error& e) {
      out = e.what();
      EXPECT_NE(e.code(), Errc::internal) << probe;
    }
    EXPECT_EQ(out.find("class"), std::string::npos) << probe << " -> " << out;
    EXPECT_EQ(out.find("function"), std::string::npos) << probe << " -> " << out;
  }
  // Globals that reach the host (Flask's, Python's) are not there.
  for (const char* name : {"config", "request", "self", "session", "g", "url_for", "os", "environ", "import", "open"}) {
    EXPECT_EQ(render_limited(std::string("{{ ") + name + " is defined }}", vars), "False") << name;
  }
  // include/import/extends would read files: refused at parse time.
  for (const char* tag : {"{% include 'x' %}", "{% import 'x' as y %}", "{% extends 'x' %}"}) {
    try {
      ChatTemplate::parse(tag);
      ADD_FAILURE() << tag;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
    }
  }
}

}  // namespace
}  // namespace troupe
