// What runs on any machine: the availability probe and its error path, and
// the host-side attention planning (metadata layout, decode splits), which
// decides every decode launch and so must be right before any GPU sees it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cuda/attn_plan.hpp"

namespace troupe {
namespace {

TEST(CudaAvailability, ProbeAgreesWithTheBackend) {
  std::string why;
  const bool ok = cuda_available(&why);
  if (ok) {
    EXPECT_GT(cuda_device_count(), 0);
    EXPECT_NO_THROW(CudaBackend backend(test::small_options()));
    return;
  }
  // No GPU (error 35 on a machine without a driver): a reason, no device,
  // and the backend refuses with that reason instead of crashing.
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(cuda_device_count(), 0);
  try {
    CudaBackend backend(test::small_options());
    ADD_FAILURE() << "constructing a CudaBackend without a device should throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

int32_t read_i32(const std::vector<unsigned char>& blob, int64_t off) {
  int32_t v;
  std::memcpy(&v, blob.data() + off, sizeof v);
  return v;
}

// TROUPE_CUDA_PREFILL_ATTENTION picks the prefill kernel when the options
// leave it automatic; any other value than scalar or tensor_cores is refused
// before a device is touched, naming the variable (and so is a
// TROUPE_CUDA_GEMV_STAGING other than 0 or 1).
TEST(CudaAvailability, PrefillAttentionFromTheEnvironment) {
  ASSERT_EQ(setenv("TROUPE_CUDA_PREFILL_ATTENTION", "tensorcores", 1), 0);
  try {
    CudaBackend backend{CudaBackendOptions{}};
    ADD_FAILURE() << "a misspelt kernel name was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("TROUPE_CUDA_PREFILL_ATTENTION is 'tensorcores'"), std::string::npos)
        << e.what();
  }
  // An explicit choice does not read the variable.
  CudaBackendOptions scalar = test::small_options();
  scalar.prefill_attention = PrefillAttention::scalar;
  std::string why;
  if (cuda_available(&why)) {
    CudaBackend backend(scalar);
    EXPECT_FALSE(backend.tensor_core_prefill());
    ASSERT_EQ(setenv("TROUPE_CUDA_PREFILL_ATTENTION", "tensor_cores", 1), 0);
    CudaBackend automatic{CudaBackendOptions{}};
    int major = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
    EXPECT_EQ(automatic.tensor_core_prefill(), major >= 8) << "compute capability " << major;
  } else {
    try {
      CudaBackend backend(scalar);
      ADD_FAILURE() << "a backend without a GPU";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unsupported) << e.what();  // the missing GPU, not the variable
    }
  }
  unsetenv("TROUPE_CUDA_PREFILL_ATTENTION");
  // The same for TROUPE_CUDA_GEMV_STAGING (0 or 1).
  ASSERT_EQ(setenv("TROUPE_CUDA_GEMV_STAGING", "yes", 1), 0);
  try {
    CudaBackend backend{CudaBackendOptions{}};
    ADD_FAILURE() << "TROUPE_CUDA_GEMV_STAGING=yes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("TROUPE_CUDA_GEMV_STAGING is 'yes'"), std::string::npos) << e.what();
  }
  unsetenv("TROUPE_CUDA_GEMV_STAGING");
}

TEST(CudaAttnPlan, LaysOutSequencesTablesDecodeListAndTiles) {
  // A decode sequence, a 70-token prefill chunk after 5 cached tokens, an
  // empty sequence and a second decode sequence; block size 16.
  std::vector<int32_t> t0{3, 1}, t1{0, 2, 4, 5, 6}, t3{7};
  const std::vector<AttnSeq> seqs{{.q_begin = 0, .n_q = 1, .n_past = 20, .block_table = t0.data()},
                                  {.q_begin = 1, .n_q = 70, .n_past = 5, .block_table = t1.data()},
                                  {.q_begin = 71, .n_q = 0, .n_past = 9, .block_table = nullptr},
                                  {.q_begin = 71, .n_q = 1, .n_past = 0, .block_table = t3.data()}};
  cuda::AttnPlan plan;
  cuda::build_attn_plan(seqs.data(), 4, 16, plan);
  EXPECT_EQ(plan.n_seqs, 4);
  EXPECT_EQ(plan.n_dec, 2);
  EXPECT_EQ(plan.n_tiles, 3);  // ceil(70 / 32)
  EXPECT_EQ(plan.max_q, 70);
  EXPECT_EQ(plan.bucket, 256);  // the smallest bucket covers 75 positions
  EXPECT_EQ(plan.table_cap, 16);
  ASSERT_EQ(plan.tables_off % 16, 0);
  ASSERT_EQ(plan.dec_off % 16, 0);
  ASSERT_EQ(plan.tiles_off % 16, 0);
  for (int i = 0; i < 4; ++i) {
    cuda::DevSeq d;
    std::memcpy(&d, plan.blob.data() + i * sizeof(cuda::DevSeq), sizeof d);
    EXPECT_EQ(d.q_begin, seqs[i].q_begin);
    EXPECT_EQ(d.n_q, seqs[i].n_q);
    EXPECT_EQ(d.n_past, seqs[i].n_past);
    EXPECT_EQ(d.table, i * 16);
  }
  // Tables are copied as far as the context reaches, zero after.
  EXPECT_EQ(read_i32(plan.blob, plan.tables_off + 0 * 64 + 0), 3);
  EXPECT_EQ(read_i32(plan.blob, plan.tables_off + 0 * 64 + 4), 1);
  EXPECT_EQ(read_i32(plan.blob, plan.tables_off + 0 * 64 + 8), 0);
  for (int b = 0; b < 5; ++b) EXPECT_EQ(read_i32(plan.blob, plan.tables_off + 1 * 64 + 4 * b), t1[b]);
  EXPECT_EQ(read_i32(plan.blob, plan.tables_off + 3 * 64), 7);
  EXPECT_EQ(read_i32(plan.blob, plan.dec_off), 0);
  EXPECT_EQ(read_i32(plan.blob, plan.dec_off + 4), 3);
  // Tiles of sequence 1, latest queries first.
  const int32_t want_tiles[3][2] = {{1, 64}, {1, 32}, {1, 0}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(read_i32(plan.blob, plan.tiles_off + 8 * i), want_tiles[i][0]);
    EXPECT_EQ(read_i32(plan.blob, plan.tiles_off + 8 * i + 4), want_tiles[i][1]);
  }
}

TEST(CudaAttnPlan, DecodeStepsOfOneShapeGiveIdenticalLayouts) {
  // Graph replay needs byte-identical launches: as decode advances inside a
  // bucket (and crosses block boundaries), only the table contents change.
  std::vector<int32_t> table(64);
  std::iota(table.begin(), table.end(), 0);
  cuda::AttnPlan a, b;
  const AttnSeq s1{.q_begin = 0, .n_q = 1, .n_past = 130, .block_table = table.data()};
  const AttnSeq s2{.q_begin = 0, .n_q = 1, .n_past = 200, .block_table = table.data()};
  cuda::build_attn_plan(&s1, 1, 16, a);
  cuda::build_attn_plan(&s2, 1, 16, b);
  EXPECT_EQ(a.blob.size(), b.blob.size());
  EXPECT_EQ(a.bucket, b.bucket);
  EXPECT_EQ(a.dec_off, b.dec_off);
  const AttnSeq s3{.q_begin = 0, .n_q = 1, .n_past = 300, .block_table = table.data()};
  cuda::build_attn_plan(&s3, 1, 16, b);
  EXPECT_EQ(b.bucket, 512);  // the next bucket: a new shape, a new graph
}

TEST(CudaAttnPlan, DecodeSplitsCoverEveryVisibleRange) {
  for (int64_t n_dec : {1, 3, 64, 256}) {
    for (int64_t bucket : {256, 1024, 32768}) {
      for (int32_t window : {0, 100, 4096}) {
        const cuda::DecodeSplit s = cuda::plan_decode_split(n_dec, 32, bucket, window, 132);
        const int64_t span = window > 0 ? std::min<int64_t>(bucket, window) : bucket;
        EXPECT_GE(s.n_splits, 1);
        EXPECT_GE(int64_t{s.n_splits} * s.split_len, span) << n_dec << " " << bucket << " " << window;
        // No split is empty for the longest visible range.
        EXPECT_LT(int64_t{s.n_splits - 1} * s.split_len, span);
      }
    }
  }
  // Batch 1 over a long context is split; a big batch already fills the GPU.
  EXPECT_GT(cuda::plan_decode_split(1, 32, 4096, 0, 132).n_splits, 1);
  EXPECT_EQ(cuda::plan_decode_split(256, 32, 4096, 0, 132).n_splits, 1);
}

TEST(CudaAttnPlan, RejectsBlockTablesOutsideTheCache) {
  std::vector<int32_t> table{0, 9};
  const AttnSeq s{.q_begin = 0, .n_q = 1, .n_past = 20, .block_table = table.data()};
  const PagedKvView kv{.k = nullptr, .v = nullptr, .n_blocks = 4, .block_size = 16, .n_head_kv = 1, .head_dim = 8};
  EXPECT_THROW(cuda::check_attn_seqs("attention", kv, &s, 1, true), Error);
  table[1] = 3;
  EXPECT_NO_THROW(cuda::check_attn_seqs("attention", kv, &s, 1, true));
  // kv_write checks only the blocks the new tokens land in.
  table[0] = -1;
  EXPECT_NO_THROW(cuda::check_attn_seqs("kv_write", kv, &s, 1, false));
  EXPECT_THROW(cuda::check_attn_seqs("attention", kv, &s, 1, true), Error);
}

}  // namespace
}  // namespace troupe
