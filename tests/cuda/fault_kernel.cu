// The trapping kernel of fault_kernel.hpp.
#include "fault_kernel.hpp"

#include <cuda_runtime.h>

namespace troupe::test {
namespace {

__global__ void trap_kernel() { __trap(); }

}  // namespace

int launch_trap_and_wait() {
  trap_kernel<<<1, 1>>>();
  return static_cast<int>(cudaDeviceSynchronize());
}

}  // namespace troupe::test
