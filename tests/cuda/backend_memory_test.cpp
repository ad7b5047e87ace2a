// The CUDA backend's host-facing memory and error behaviour: pinned host
// buffers and the direct DMA copies a pipeline stage's hidden states and
// logits take, one device copy of a tied embedding, the weight types it
// runs, and CUDA errors as Error(unavailable) -- a sticky one (an illegal
// address) failing every later call. The error classification runs on any
// machine; the rest needs a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "fault_kernel.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace troupe {
namespace {

Errc code_of(cudaError_t e, bool* sticky, std::string* what) {
  try {
    cuda::throw_cuda_error(e, "call()", "file.cpp", 7);
  } catch (const cuda::CudaError& err) {
    *sticky = err.sticky();
    *what = err.what();
    return err.code();
  }
  return Errc::internal;
}

TEST(CudaErrors, CudaFailuresAreUnavailableAndNameTheError) {
  bool sticky = true;
  std::string what;
  EXPECT_EQ(code_of(cudaErrorInvalidValue, &sticky, &what), Errc::unavailable);
  EXPECT_FALSE(sticky);
  EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
  EXPECT_NE(what.find("call() at file.cpp:7"), std::string::npos) << what;

  EXPECT_EQ(code_of(cudaErrorMemoryAllocation, &sticky, &what), Errc::out_of_memory);
  EXPECT_FALSE(sticky);

  // A kernel fault corrupts the context: sticky, and the message says so.
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
                        cudaErrorIllegalInstruction, cudaErrorAssert}) {
    EXPECT_EQ(code_of(e, &sticky, &what), Errc::unavailable) << e;
    EXPECT_TRUE(sticky) << e;
    EXPECT_NE(what.find(cudaGetErrorName(e)), std::string::npos) << what;
    EXPECT_NE(what.find("unusable"), std::string::npos) << what;
  }
}

TEST(CudaBackendMemory, WeightTypesItRuns) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                  DType::mxfp4}) {
    EXPECT_TRUE(gpu.supports(t)) << dtype_name(t);
  }
  EXPECT_FALSE(gpu.supports(static_cast<DType>(16)));  // iq2_xxs: not a DType Troupe has
}

TEST(CudaBackendMemory, PinnedBuffersCopyByDirectDma) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options(true));
  // A stage's hand-off sizes: hidden states [n_tokens, n_embd] of a small
  // decode batch, and the logits of a long prefill chunk (past the 4 MiB
  // readback buffer).
  for (size_t n : {size_t{8} * 2048, size_t{1} << 21}) {
    SCOPED_TRACE(n);
    auto* in = static_cast<float*>(gpu.host_alloc(n * sizeof(float)));
    auto* out = static_cast<float*>(gpu.host_alloc(n * sizeof(float)));
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, in), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeHost);  // page-locked
    std::iota(in, in + n, 0.0f);
    test::DeviceFloats dev(gpu, n), doubled(gpu, n);
    const int64_t before = gpu.stats().direct_copies;
    gpu.copy_from_host(dev.get(), in, n * sizeof(float));
    // Recorded ops after the async copy see its data (stream order).
    gpu.copy_from_host(doubled.get(), in, n * sizeof(float));
    gpu.add(doubled.get(), dev.get(), static_cast<int64_t>(n));
    gpu.copy_to_host(out, doubled.get(), n * sizeof(float));
    EXPECT_EQ(gpu.stats().direct_copies, before + 3);
    for (size_t i = 0; i < n; i += 997) ASSERT_EQ(out[i], 2.0f * static_cast<float>(i)) << i;
    gpu.host_free(in);
    gpu.host_free(out);
  }
  // Pageable memory still works, through staging and the readback buffer.
  std::vector<float> host(4096, 3.0f), back(4096);
  test::DeviceFloats dev(gpu, host.size());
  const int64_t before = gpu.stats().direct_copies;
  gpu.copy_from_host(dev.get(), host.data(), host.size() * sizeof(float));
  gpu.copy_to_host(back.data(), dev.get(), back.size() * sizeof(float));
  EXPECT_EQ(back, host);
  EXPECT_EQ(gpu.stats().direct_copies, before);
}

TEST(CudaBackendMemory, TiedEmbeddingIsUploadedOnce) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::vector<float> table(64 * 96, 0.5f);  // [n_vocab 96, n_embd 64]
  const Weight host{.data = table.data(), .type = DType::f32, .n_in = 64, .n_out = 96};
  const Weight embd = gpu.upload_weight(host);
  const size_t bytes = gpu.stats().weight_bytes;
  const Weight head = gpu.upload_weight(host);  // the output head: the same tensor
  EXPECT_EQ(head.data, embd.data);
  EXPECT_EQ(head.type, DType::bf16);
  EXPECT_EQ(gpu.stats().weight_bytes, bytes);
  // Another shape over the same bytes is another weight.
  const Weight other = gpu.upload_weight({.data = table.data(), .type = DType::f32, .n_in = 96, .n_out = 64});
  EXPECT_NE(other.data, embd.data);
  gpu.deallocate(const_cast<void*>(other.data));
  // Each upload holds a reference: the copy lives until the last is dropped.
  gpu.deallocate(const_cast<void*>(embd.data));
  EXPECT_EQ(gpu.stats().weight_bytes, bytes);
  gpu.deallocate(const_cast<void*>(head.data));
  EXPECT_EQ(gpu.stats().weight_bytes, 0u);
  EXPECT_THROW(gpu.deallocate(const_cast<void*>(head.data)), Error);
}

// A fault kills the CUDA context for the whole process, so this runs in a
// child process (the "threadsafe" death-test style re-executes the binary
// instead of forking a process that already initialised CUDA). The fault is
// a trap in a kernel of the test's own: a write to an unmapped address is
// not sure to fault (on the H200 machine, where the GPU shares the process's
// address space through HMM, one to 1 << 40 went through without an error).
TEST(CudaBackendDeathTest, StickyErrorFailsTheStepAndEveryLaterCall) {
  TROUPE_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CudaBackend gpu(test::small_options());
        auto* good = static_cast<float*>(gpu.allocate(1024 * sizeof(float)));
        // Printed: a failing child's stderr is the death test's message.
        std::fprintf(stderr, "trap kernel: CUDA error %d\n", test::launch_trap_and_wait());
        int failures = 0;
        try {
          gpu.add(good, good, 1024);
          gpu.synchronize();
        } catch (const Error& e) {
          std::fprintf(stderr, "first: %s\n", e.what());
          if (e.code() == Errc::unavailable && std::string(e.what()).find("cudaError") != std::string::npos) {
            ++failures;
          }
        }
        // Later calls fail at once with the first error, also ones that
        // only record.
        for (int i = 0; i < 2; ++i) {
          try {
            if (i == 0) gpu.add(good, good, 1024);
            if (i == 1) gpu.synchronize();
          } catch (const Error& e) {
            std::fprintf(stderr, "later %d: %s\n", i, e.what());
            if (e.code() == Errc::unavailable && std::string(e.what()).find("unusable") != std::string::npos) {
              ++failures;
            }
          }
        }
        gpu.deallocate(good);  // teardown still works
        std::fprintf(stderr, "%d of 3 calls failed as expected\n", failures);
        std::exit(failures == 3 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace troupe
