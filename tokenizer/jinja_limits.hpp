// Limits on one render of a chat template. Templates come from model files
// (a GGUF, a Hub repo), so they are untrusted code: each limit turns a
// hostile template into Error(invalid_argument) naming the limit, instead
// of a hang, a stack overflow or an out-of-memory kill. docs/models.md
// lists them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::jinja {

// Nesting of statements, expressions and macro calls (a macro calling itself).
inline constexpr int kMaxDepth = 1000;
// Stack one render may use, whatever the levels cost: at most this, and at
// most half of what is left of the thread's stack when the render starts.
// A level's frames differ several times between builds (a sanitizer build
// at -O0 ran out of an 8 MB stack before 1000 levels), so the depth alone
// does not keep a hostile template from overflowing the stack.
inline constexpr size_t kMaxStackBytes = size_t{4} << 20;
// Statements run, expressions evaluated and loop iterations, together: a real
// chat template over a long conversation takes a few tens of thousands.
inline constexpr int64_t kMaxSteps = 5'000'000;
// Items one range() may make (as Jinja's sandbox).
inline constexpr int64_t kMaxRangeItems = 100'000;
// Bytes of output, and of one string or list a `*` repetition may make.
inline constexpr size_t kMaxOutputBytes = size_t{64} << 20;
// Wall-clock time of one render, checked every kClockEverySteps steps
// (a clock read costs about 20 ns, a step a few hundred; one step may run a
// builtin over megabytes, so the check stays frequent).
inline constexpr double kMaxRenderSeconds = 2.0;
inline constexpr int64_t kClockEverySteps = 4;

}  // namespace troupe::jinja
