// GGUF reading and writing: the real stories260K model (checked against the
// same weights in llama2.c's independent .bin format), typed metadata access,
// and writer round trips of every value type and tensor dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "model/gguf.hpp"
#include "model/gguf_writer.hpp"
#include "tests/model/gguf_test_util.hpp"

namespace troupe::gguf {
namespace {

using namespace troupe::gguf::test;

const std::string kStories = TROUPE_SHARED_DIR "/models/stories260K/stories260K.gguf";
const std::string kStoriesBin = TROUPE_SHARED_DIR "/models/stories260K/stories260K.bin";

TEST(GgufStories, Metadata) {
  const GgufFile f = GgufFile::open(kStories);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 5u);
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count"), 8u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f.get_i64("llama.context_length"), 2048);
  EXPECT_FLOAT_EQ(f.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");

  const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3 + 0x0A], "<0x0A>");  // byte-fallback pieces follow the specials
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores").size(), 512u);
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type").size(), 512u);

  EXPECT_TRUE(f.has("llama.block_count"));
  EXPECT_FALSE(f.has("llama.expert_count"));
  EXPECT_FALSE(f.find_u32("llama.expert_count").has_value());
  EXPECT_EQ(f.find_u32("llama.block_count"), 5u);
  EXPECT_EQ(f.find_string("general.architecture"), "llama");
  EXPECT_EQ(f.find_string_array("no.such.key"), nullptr);
  ASSERT_NE(f.find("llama.block_count"), nullptr);
  EXPECT_EQ(value_type(*f.find("llama.block_count")), ValueType::u32);
  EXPECT_EQ(describe_type(*f.find("tokenizer.ggml.tokens")), "array of string");
  EXPECT_EQ(f.metadata().size(), 19u);
}

TEST(GgufStories, TensorTable) {
  const GgufFile f = GgufFile::open(kStories);
  ASSERT_EQ(f.tensors().size(), 48u);  // 3 + 5 layers x 9
  const TensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.type, DType::f32);
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb.n_elements(), 64 * 512);
  EXPECT_EQ(emb.n_bytes, 64 * 512 * 4);
  f.expect_shape(emb, {64, 512});
  f.expect_shape(f.tensor("output_norm.weight"), {64});
  f.expect_shape(f.tensor("blk.0.attn_k.weight"), {64, 32});
  f.expect_shape(f.tensor("blk.4.ffn_down.weight"), {172, 64});
  f.expect_shape(f.tensor("blk.4.ffn_gate.weight"), {64, 172});
  EXPECT_EQ(f.find_tensor("blk.5.attn_q.weight"), nullptr);
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << t.name;
    EXPECT_EQ(static_cast<const uint8_t*>(t.data), f.file().data() + f.data_offset() + t.offset) << t.name;
  }
}

// The llama2.c .bin holds the same weights in a format with no tensor table:
// a 7 x int32 header then tensors in a fixed order, each row-major with the
// input dimension fastest, i.e. GGUF's ne0. Every GGUF tensor must be
// byte-identical to its slice there.
TEST(GgufStories, WeightsMatchLlama2cFile) {
  const GgufFile f = GgufFile::open(kStories);
  const std::vector<uint8_t> bin = read_bytes(kStoriesBin);
  ASSERT_GE(bin.size(), 28u);
  int32_t hdr[7];
  std::memcpy(hdr, bin.data(), sizeof hdr);
  const int64_t dim = hdr[0], hidden = hdr[1], n_layer = hdr[2], n_head = hdr[3], n_head_kv = hdr[4],
                n_vocab = hdr[5];
  const int64_t kv_dim = dim / n_head * n_head_kv;
  size_t at = 28;
  auto expect_same = [&](const std::string& name, int64_t n_floats) {
    const TensorInfo& t = f.tensor(name);
    ASSERT_EQ(t.n_bytes, n_floats * 4) << name;
    ASSERT_LE(at + t.n_bytes, bin.size());
    EXPECT_EQ(std::memcmp(t.data, bin.data() + at, static_cast<size_t>(t.n_bytes)), 0) << name;
  };
  // Each llama2.c array stacks all layers; walk it layer by layer.
  auto per_layer = [&](const std::string& suffix, int64_t n_floats) {
    for (int64_t l = 0; l < n_layer; ++l) {
      expect_same("blk." + std::to_string(l) + "." + suffix, n_floats);
      at += static_cast<size_t>(n_floats * 4);
    }
  };
  expect_same("token_embd.weight", n_vocab * dim);
  at += static_cast<size_t>(n_vocab * dim * 4);
  per_layer("attn_norm.weight", dim);
  per_layer("attn_q.weight", dim * dim);
  per_layer("attn_k.weight", dim * kv_dim);
  per_layer("attn_v.weight", dim * kv_dim);
  per_layer("attn_output.weight", dim * dim);
  per_layer("ffn_norm.weight", dim);
  per_layer("ffn_gate.weight", dim * hidden);
  per_layer("ffn_down.weight", dim * hidden);
  per_layer("ffn_up.weight", dim * hidden);
  expect_same("output_norm.weight", dim);
}

TEST(GgufStories, TypedGetterErrors) {
  const GgufFile f = GgufFile::open(kStories);
  expect_error([&] { f.get_u32("llama.expert_count"); }, Errc::bad_format,
               {kStories, "missing required key 'llama.expert_count'"});
  expect_error([&] { f.get_string("llama.block_count"); }, Errc::bad_format,
               {kStories, "key 'llama.block_count' has type u32, expected string"});
  expect_error([&] { f.get_u32("general.architecture"); }, Errc::bad_format,
               {"key 'general.architecture' has type string, expected u32"});
  expect_error([&] { f.find_f32("general.architecture"); }, Errc::bad_format, {"expected f32"});
  expect_error([&] { f.get_string_array("tokenizer.ggml.scores"); }, Errc::bad_format,
               {"has type array of f32, expected array of string"});
  expect_error([&] { f.get_i32_array("tokenizer.ggml.scores"); }, Errc::bad_format, {"expected array of i32"});
  expect_error([&] { f.get_bool("llama.block_count"); }, Errc::bad_format, {"expected bool"});
  expect_error([&] { f.tensor("output_bias"); }, Errc::bad_format, {kStories, "missing tensor 'output_bias'"});
  expect_error([&] { f.expect_shape(f.tensor("token_embd.weight"), {512, 64}); }, Errc::bad_format,
               {kStories, "tensor 'token_embd.weight' has shape [64, 512], expected [512, 64]"});
  expect_error([&] { f.expect_shape(f.tensor("output_norm.weight"), {64, 1}); }, Errc::bad_format,
               {"has shape [64], expected [64, 1]"});
}

// Every value type, arrays of each, nested arrays, and empty ones.
TEST(GgufWriter, MetadataRoundTrip) {
  std::vector<std::pair<std::string, Value>> kv = {
      {"t.u8", uint8_t{250}},
      {"t.i8", int8_t{-128}},
      {"t.u16", uint16_t{65535}},
      {"t.i16", int16_t{-32768}},
      {"t.u32", uint32_t{4000000000u}},
      {"t.i32", int32_t{-2000000000}},
      {"t.f32", 3.5f},
      {"t.bool.true", true},
      {"t.bool.false", false},
      {"t.string", std::string("h\xC3\xA9llo \xE2\x96\x81world")},
      {"t.string.empty", std::string()},
      {"t.u64", std::numeric_limits<uint64_t>::max()},
      {"t.i64", std::numeric_limits<int64_t>::min()},
      {"t.f64", -1.25e300},
      {"a.u8", Array{std::vector<uint8_t>{0, 1, 255}}},
      {"a.i8", Array{std::vector<int8_t>{-1, 127}}},
      {"a.u16", Array{std::vector<uint16_t>{7}}},
      {"a.i16", Array{std::vector<int16_t>{-7, 8}}},
      {"a.u32", Array{std::vector<uint32_t>{1, 2, 3}}},
      {"a.i32", Array{std::vector<int32_t>{-5, 0, 5}}},
      {"a.f32", Array{std::vector<float>{0.5f, -2.0f}}},
      {"a.bool", Array{std::vector<bool>{true, false, true}}},
      {"a.string", Array{std::vector<std::string>{"a", "", "<0x0A>"}}},
      {"a.u64", Array{std::vector<uint64_t>{1ull << 63}}},
      {"a.i64", Array{std::vector<int64_t>{-(1ll << 62)}}},
      {"a.f64", Array{std::vector<double>{1e-300}}},
      {"a.empty", Array{std::vector<int32_t>{}}},
      {"a.nested", Array{std::vector<Array>{Array{std::vector<std::string>{"x", "y"}},
                                            Array{std::vector<int16_t>{1, 2, 3}},
                                            Array{std::vector<Array>{Array{std::vector<float>{9.0f}}}}}}},
  };
  GgufWriter w;
  for (const auto& [k, v] : kv) w.add(k, v);
  w.add_u32("h.u32", 17);
  w.add_string("h.string", "llama");
  w.add_string_array("h.strings", {"<unk>", "<s>"});
  w.add_f32_array("h.f32s", {1.0f, -1.0f});
  w.add_i32_array("h.i32s", {3, 6});
  const std::string path = temp_path("metadata_round_trip");
  w.write(path);

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_TRUE(f.tensors().empty());
  ASSERT_EQ(f.metadata().size(), kv.size() + 5);
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, kv[i].first);  // file order is insertion order
    const Value* v = f.find(kv[i].first);
    ASSERT_NE(v, nullptr) << kv[i].first;
    EXPECT_EQ(v->index(), kv[i].second.index()) << kv[i].first;
    EXPECT_TRUE(*v == kv[i].second) << kv[i].first;
  }
  EXPECT_EQ(describe_type(*f.find("a.nested")), "array of array of string");
  EXPECT_EQ(f.get_u32("h.u32"), 17u);
  EXPECT_EQ(f.get_string("h.string"), "llama");
  EXPECT_EQ(f.get_string_array("h.strings"), (std::vector<std::string>{"<unk>", "<s>"}));
  EXPECT_EQ(f.get_f32_array("h.f32s"), (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(f.get_i32_array("h.i32s"), (std::vector<int32_t>{3, 6}));
  EXPECT_TRUE(f.get_bool("t.bool.true"));
  EXPECT_FALSE(f.find_bool("t.bool.false").value());
}

TEST(GgufWriter, IntegerAndFloatConversions) {
  GgufWriter w;
  w.add("u8", uint8_t{200});
  w.add("i64.small", int64_t{123456});
  w.add("i32.neg", int32_t{-1});
  w.add("u64.big", std::numeric_limits<uint64_t>::max());
  w.add("u64.fits", uint64_t{1} << 40);
  w.add("f64", 0.25);
  w.add("a.u8", Array{std::vector<uint8_t>{1, 200}});
  w.add("a.u64.big", Array{std::vector<uint64_t>{1, uint64_t{1} << 31}});
  w.add("a.f64", Array{std::vector<double>{0.5, -8.0}});
  const std::string path = temp_path("conversions");
  w.write(path);
  const GgufFile f = GgufFile::open(path);

  EXPECT_EQ(f.get_u32("u8"), 200u);
  EXPECT_EQ(f.get_u32("i64.small"), 123456u);
  EXPECT_EQ(f.get_i64("i32.neg"), -1);
  EXPECT_EQ(f.get_i64("u64.fits"), int64_t{1} << 40);
  EXPECT_EQ(f.get_f32("f64"), 0.25f);
  EXPECT_EQ(f.get_i32_array("a.u8"), (std::vector<int32_t>{1, 200}));
  EXPECT_EQ(f.get_f32_array("a.f64"), (std::vector<float>{0.5f, -8.0f}));
  expect_error([&] { f.get_u32("i32.neg"); }, Errc::bad_format, {path, "key 'i32.neg' value -1 is out of range for u32"});
  expect_error([&] { f.get_u32("u64.fits"); }, Errc::bad_format, {"out of range for u32"});
  expect_error([&] { f.get_i64("u64.big"); }, Errc::bad_format, {"18446744073709551615 is out of range for i64"});
  expect_error([&] { f.get_i32_array("a.u64.big"); }, Errc::bad_format,
               {"key 'a.u64.big' element 1 value 2147483648 is out of range for i32"});
  expect_error([&] { f.get_f32_array("u8"); }, Errc::bad_format, {"has type u8, expected array of f32"});
}

// One tensor of every dtype; the data must come back byte-identical at an
// aligned address, with the requested alignment recorded in the file.
TEST(GgufWriter, TensorRoundTripEveryDtype) {
  for (uint32_t alignment : {32u, 64u, 4096u}) {
    GgufWriter w({.alignment = alignment});
    w.add_string("general.architecture", "llama");
    const std::vector<DType> types = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,
                                      DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_K, DType::q3_K,
                                      DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                                      DType::mxfp4};
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t i = 0; i < types.size(); ++i) {
      // 256 x 3 elements (one k-quant super-block per row), with bytes that
      // differ per tensor and position.
      std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes(types[i], 256) * 3));
      for (size_t j = 0; j < bytes.size(); ++j) bytes[j] = static_cast<uint8_t>(j * 7 + i * 31 + 1);
      payloads.push_back(bytes);
      w.add_tensor("t." + std::string(dtype_name(types[i])), types[i], {256, 3}, bytes);
    }
    w.add_tensor("t.4d", DType::f32, {32, 2, 3, 2}, f32_bytes(std::vector<float>(32 * 12, 1.5f)));
    const std::string path = temp_path("tensors_" + std::to_string(alignment));
    w.write(path);

    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.has("general.alignment"), alignment != 32);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    ASSERT_EQ(f.tensors().size(), types.size() + 1);
    for (size_t i = 0; i < types.size(); ++i) {
      const TensorInfo& t = f.tensors()[i];
      EXPECT_EQ(t.name, "t." + std::string(dtype_name(types[i])));
      EXPECT_EQ(t.type, types[i]);
      EXPECT_EQ(t.shape, (std::vector<int64_t>{256, 3}));
      EXPECT_EQ(t.offset % alignment, 0u);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignment, 0u);
      ASSERT_EQ(t.n_bytes, static_cast<int64_t>(payloads[i].size()));
      EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), payloads[i].size()), 0) << t.name;
    }
    const TensorInfo& t4 = f.tensor("t.4d");
    EXPECT_EQ(t4.shape, (std::vector<int64_t>{32, 2, 3, 2}));
    EXPECT_EQ(t4.n_elements(), 32 * 12);
    float last = 0;
    std::memcpy(&last, static_cast<const uint8_t*>(t4.data) + t4.n_bytes - 4, 4);
    EXPECT_EQ(last, 1.5f);
  }
}

// A tensor larger than the writer's chunk is produced in several calls, each
// asked for the rows that come next.
TEST(GgufWriter, StreamsRowsInChunks) {
  const int64_t n_cols = 1024, n_rows = 3000;  // 12 MB of f32
  GgufWriter w;
  int calls = 0;
  int64_t next_row = 0;
  w.add_tensor("big", DType::f32, {n_cols, n_rows}, [&](int64_t first, int64_t n, uint8_t* dst) {
    ++calls;
    EXPECT_EQ(first, next_row);
    next_row = first + n;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < n_cols; ++c) {
        const float v = static_cast<float>(first + r) + static_cast<float>(c) / 2048.0f;
        std::memcpy(dst + (r * n_cols + c) * 4, &v, 4);
      }
    }
  });
  const std::string path = temp_path("stream");
  w.write(path);
  EXPECT_GT(calls, 1);
  EXPECT_EQ(next_row, n_rows);

  const GgufFile f = GgufFile::open(path);
  const auto* data = static_cast<const float*>(f.tensor("big").data);
  for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{2047}, n_rows - 1}) {
    EXPECT_EQ(data[r * n_cols + 5], static_cast<float>(r) + 5.0f / 2048.0f) << r;
  }
}

TEST(GgufWriter, Version2ReadsBack) {
  GgufWriter w({.version = 2});
  w.add_u32("k", 1);
  const std::string path = temp_path("v2");
  w.write(path);
  EXPECT_EQ(GgufFile::open(path).version(), 2u);
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  w.add_u32("k", 1);
  expect_error([&] { w.add_u32("k", 2); }, Errc::invalid_argument, {"duplicate key 'k'"});
  expect_error([&] { w.add_u32("general.alignment", 64); }, Errc::invalid_argument, {"general.alignment"});
  w.add_tensor("t", DType::f32, {4}, f32_bytes({1, 2, 3, 4}));
  expect_error([&] { w.add_tensor("t", DType::f32, {4}, f32_bytes({1, 2, 3, 4})); }, Errc::invalid_argument,
               {"duplicate tensor name 't'"});
  expect_error([&] { w.add_tensor("u", DType::f32, {5}, f32_bytes({1, 2, 3, 4})); }, Errc::invalid_argument,
               {"tensor 'u' needs 20 bytes, got 16"});
  expect_error([&] { w.add_tensor("q", DType::q8_0, {16}, std::vector<uint8_t>(17)); }, Errc::invalid_argument,
               {"tensor 'q' row length 16 is not a multiple of the block size"});
  expect_error([] { GgufWriter bad({.alignment = 48}); }, Errc::invalid_argument, {"alignment 48"});
  expect_error([&] { w.write(testing::TempDir() + "no/such/dir/x.gguf"); }, Errc::io, {"no/such/dir/x.gguf"});
}

}  // namespace
}  // namespace troupe::gguf
