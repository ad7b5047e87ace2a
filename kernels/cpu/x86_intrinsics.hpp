// <immintrin.h> for the x86 kernel files, with one GCC 12 warning about its
// own headers silenced.
#pragma once

// GCC 12 flags the intentionally undefined pass-through operand inside its
// own AVX-512 intrinsics (_mm512_undefined_*) as uninitialised once they are
// inlined; the warning points into the header, so it is silenced there only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
