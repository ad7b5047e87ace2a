// A kernel that traps, so the tests can meet a fault that kills the CUDA
// context (a sticky error) on any GPU.
#pragma once

namespace troupe::test {

// Launches one thread that executes a trap instruction on the legacy default
// stream and waits for it; returns the cudaError_t CUDA reports (expected:
// cudaErrorLaunchFailure, which CUDA documents as sticky).
int launch_trap_and_wait();

}  // namespace troupe::test
