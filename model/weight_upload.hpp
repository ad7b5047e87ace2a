// Host weights into a backend's memory: the CPU backend uses them in place
// (adding its repacked layouts), a device backend copies them once. Every
// allocation the backend makes is recorded in `owned`, for the owner to
// free with Backend::deallocate.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.hpp"

namespace troupe {

// An f32 vector (norms, biases) of n values; null stays null.
const float* upload_vector(Backend& backend, const float* host, int64_t n, std::vector<void*>& owned);
// An embedding table: read by row, never by matmul.
Weight upload_table(Backend& backend, const Weight& host, std::vector<void*>& owned);
// A matrix for matmul, in whatever layout of its own the backend adds.
Weight upload_matrix(Backend& backend, const Weight& host, std::vector<void*>& owned);

}  // namespace troupe
