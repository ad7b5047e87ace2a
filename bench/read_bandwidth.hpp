// The machine's read bandwidth for a working set of a given size: the
// roofline that bench_generate sets each decode figure against.
#pragma once

#include <cstddef>

namespace troupe::bench {

// GB/s at which `threads` threads read a buffer of `bytes` (each its own
// slice), the best of a few passes. Each thread reads its slice as four
// interleaved streams with a software prefetch ahead of each: the fastest
// plain read found here (one stream without prefetch read 40% less from L3
// on the Xeon), in transparent huge pages as the weights are. A model that
// fits in L3 gets the L3 rate, a larger one DRAM's.
double read_bandwidth_gbs(size_t bytes, int threads);

}  // namespace troupe::bench
