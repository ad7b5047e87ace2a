// The safetensors reader: values read back from small files written here,
// every corruption (truncation, bad header, inconsistent shapes and offsets,
// overlaps, unsupported dtypes) rejected with an error naming the file, the
// tensor and the problem, and sharded checkpoints through the index file.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.hpp"
#include "model/safetensors.hpp"
#include "safetensors_test_util.hpp"

namespace troupe {
namespace {

using st_test::as_bytes;
using st_test::expect_error;
using st_test::TempDir;
using st_test::write_raw;
using st_test::write_safetensors;

TEST(Safetensors, ReadsF32F16Bf16TensorsAndMetadata) {
  TempDir dir("st_read");
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  const std::vector<uint16_t> h = {f32_to_fp16(0.5f), f32_to_fp16(-1.25f)};
  const std::vector<uint16_t> b = {f32_to_bf16(3.0f), f32_to_bf16(-96.0f), f32_to_bf16(0.125f)};
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path,
                    {{"h", "F16", {2}, as_bytes(h)}, {"a", "F32", {2, 3}, as_bytes(a)}, {"b", "BF16", {3}, as_bytes(b)}},
                    {{"format", "pt"}});
  const auto f = safetensors::File::open(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");

  const safetensors::TensorInfo* ta = f.find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->type, DType::f32);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta->n_bytes, 24);
  std::vector<float> got(6);
  std::memcpy(got.data(), ta->data, 24);
  EXPECT_EQ(got, a);

  const safetensors::TensorInfo* th = f.find("h");
  ASSERT_NE(th, nullptr);
  EXPECT_EQ(th->type, DType::f16);
  uint16_t hv[2];
  std::memcpy(hv, th->data, 4);
  EXPECT_EQ(fp16_to_f32(hv[1]), -1.25f);

  const safetensors::TensorInfo* tb = f.find("b");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->type, DType::bf16);
  uint16_t bv[3];
  std::memcpy(bv, tb->data, 6);
  EXPECT_EQ(bf16_to_f32(bv[1]), -96.0f);
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(Safetensors, ScalarAndEmptyTensors) {
  TempDir dir("st_scalar");
  const std::string path = dir.file("x.safetensors");
  write_safetensors(path, {{"scalar", "F32", {}, as_bytes(std::vector<float>{4.0f})}, {"empty", "F32", {0, 5}, {}}});
  const auto f = safetensors::File::open(path);
  EXPECT_EQ(f.find("scalar")->n_elements(), 1);
  EXPECT_EQ(f.find("empty")->n_bytes, 0);
}

TEST(Safetensors, FileShorterThanTheHeaderLength) {
  TempDir dir("st_short");
  const std::string path = dir.file("x.safetensors");
  st_test::write_bytes(path, {1, 2, 3, 4, 5});
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "truncated", "8-byte header length"});
}

TEST(Safetensors, HeaderLengthPastTheEnd) {
  TempDir dir("st_hlen");
  const std::string path = dir.file("x.safetensors");
  write_raw(path, "{}", {}, 1000);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "header length 1000", "past the end"});
}

TEST(Safetensors, AbsurdHeaderLength) {
  TempDir dir("st_huge");
  const std::string path = dir.file("x.safetensors");
  write_raw(path, "{}", {}, uint64_t{1} << 62);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "exceeds"});
}

TEST(Safetensors, HeaderNotJson) {
  TempDir dir("st_json");
  const std::string path = dir.file("x.safetensors");
  write_raw(path, "{\"a\": {\"dtype\": ", {});
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "not valid JSON"});
  write_raw(path, "[1, 2]", {});
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "not a JSON object"});
}

TEST(Safetensors, MissingOrMalformedFields) {
  TempDir dir("st_fields");
  const std::string path = dir.file("x.safetensors");
  const std::vector<uint8_t> data(8);
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [2]}})", data);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "tensor 'w'", "missing 'data_offsets'"});
  write_raw(path, R"({"w": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}})", data);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"tensor 'w'", "dtype is not a string"});
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", data);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"tensor 'w'", "negative"});
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", data);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"tensor 'w'", "non-integer"});
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", data);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"tensor 'w'", "[begin, end]"});
  write_raw(path, R"({"w": [1, 2]})", data);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"tensor 'w'", "not a JSON object"});
  write_raw(path, R"({"__metadata__": {"format": 1}})", data);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"__metadata__", "'format'"});
}

TEST(Safetensors, UnknownDtypeIsCorrupt) {
  TempDir dir("st_dtype");
  const std::string path = dir.file("x.safetensors");
  write_raw(path, R"({"w": {"dtype": "F17", "shape": [2], "data_offsets": [0, 8]}})", std::vector<uint8_t>(8));
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "tensor 'w'", "unknown dtype 'F17'"});
}

TEST(Safetensors, ShapeInconsistentWithByteRange) {
  TempDir dir("st_shape");
  const std::string path = dir.file("x.safetensors");
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::vector<uint8_t>(8));
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "tensor 'w'", "needs 12 bytes", "cover 8"});
  write_raw(path, R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})", std::vector<uint8_t>(8));
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"tensor 'w'", "needs 12 bytes"});
}

TEST(Safetensors, OffsetsOutsideTheDataSection) {
  TempDir dir("st_range");
  const std::string path = dir.file("x.safetensors");
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", std::vector<uint8_t>(8));
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "tensor 'w'", "past the 8-byte data section"});
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", std::vector<uint8_t>(8));
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {"tensor 'w'", "before begin"});
}

TEST(Safetensors, TruncatedData) {
  TempDir dir("st_trunc");
  const std::string path = dir.file("x.safetensors");
  write_safetensors(path, {{"a", "F32", {4}, std::vector<uint8_t>(16)}, {"b", "F32", {4}, std::vector<uint8_t>(16)}});
  auto bytes = std::vector<uint8_t>(std::filesystem::file_size(path));
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ASSERT_GT(bytes.size(), 5u);
  const std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 5);  // cut into "b"
  st_test::write_bytes(path, cut);
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "tensor 'b'", "truncated"});
}

TEST(Safetensors, OverlappingTensors) {
  TempDir dir("st_overlap");
  const std::string path = dir.file("x.safetensors");
  write_raw(path,
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
            std::vector<uint8_t>(12));
  expect_error([&] { safetensors::File::open(path); }, Errc::bad_format, {path, "'a'", "'b'", "overlap"});
}

TEST(Safetensors, UnsupportedDtypeNamedOnUse) {
  TempDir dir("st_i64");
  write_safetensors(dir.file("model.safetensors"),
                    {{"ids", "I64", {2}, std::vector<uint8_t>(16)}, {"w", "F32", {1}, std::vector<uint8_t>(4)}});
  const auto ckpt = safetensors::Checkpoint::open_dir(dir.path().string());
  EXPECT_EQ(ckpt.tensor("w").type, DType::f32);
  ASSERT_NE(ckpt.find("ids"), nullptr);  // listed: the file itself is fine
  expect_error([&] { ckpt.tensor("ids"); }, Errc::unsupported, {"model.safetensors", "tensor 'ids'", "I64", "F32, F16 and BF16"});
  expect_error([&] { ckpt.tensor("nope"); }, Errc::bad_format, {"missing tensor 'nope'"});
}

TEST(Safetensors, DirectoryWithoutWeights) {
  TempDir dir("st_empty");
  expect_error([&] { safetensors::Checkpoint::open_dir(dir.path().string()); }, Errc::io,
               {dir.path().string(), "no model.safetensors"});
}

// Two shards and the index that maps tensor names to them.
void write_shards(const TempDir& dir) {
  write_safetensors(dir.file("model-00001-of-00002.safetensors"),
                    {{"a", "F32", {2}, as_bytes(std::vector<float>{1, 2})}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                    {{"b", "F32", {1}, as_bytes(std::vector<float>{3})}, {"c", "F16", {1}, std::vector<uint8_t>(2)}});
}

TEST(Safetensors, ShardedCheckpoint) {
  TempDir dir("st_shards");
  write_shards(dir);
  st_test::write_text(dir.file("model.safetensors.index.json"), R"({"metadata": {"total_size": 14}, "weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})");
  const auto ckpt = safetensors::Checkpoint::open_dir(dir.path().string());
  EXPECT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b", "c"}));
  float b = 0;
  std::memcpy(&b, ckpt.tensor("b").data, 4);
  EXPECT_EQ(b, 3.0f);
  EXPECT_NE(ckpt.tensor("a").file.find("model-00001-of-00002"), std::string::npos);
}

TEST(Safetensors, IndexErrors) {
  TempDir dir("st_index");
  write_shards(dir);
  const std::string dir_s = dir.path().string();
  const std::string index = dir.file("model.safetensors.index.json");
  auto open = [&] { safetensors::Checkpoint::open_dir(dir_s); };

  st_test::write_text(index, R"({"weight_map": {"a": "model-00009-of-00009.safetensors"}})");
  expect_error(open, Errc::io, {"model-00009-of-00009.safetensors"});

  st_test::write_text(index, R"({"weight_map": {"b": "model-00001-of-00002.safetensors"}})");
  expect_error(open, Errc::bad_format, {index, "tensor 'b'", "model-00001-of-00002", "does not contain it"});

  st_test::write_text(index, R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})");
  expect_error(open, Errc::bad_format, {index, "tensor 'a'", "not a file name inside the directory"});

  st_test::write_text(index, R"({"metadata": {}})");
  expect_error(open, Errc::bad_format, {index, "weight_map"});

  st_test::write_text(index, R"({"weight_map": )");
  expect_error(open, Errc::bad_format, {index, "not valid JSON"});

  // The same tensor in two shards: whichever the index names, it is ambiguous.
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), {{"a", "F32", {1}, std::vector<uint8_t>(4)}});
  st_test::write_text(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                                "x": "model-00002-of-00002.safetensors"}})");
  expect_error(open, Errc::bad_format, {"tensor 'a'", "stored in both"});
}

TEST(Safetensors, ReadsTheShardsTransformersWrote) {
  // tests/fixtures/hf/mixtral was saved by transformers with a small
  // max_shard_size: its index and shards must resolve every tensor.
  const std::string dir = std::string(TROUPE_FIXTURES_DIR) + "/hf/mixtral";
  const auto ckpt = safetensors::Checkpoint::open_dir(dir);
  EXPECT_GE(ckpt.files().size(), 2u);
  size_t n = 0;
  for (const auto& f : ckpt.files()) n += f.tensors().size();
  EXPECT_EQ(ckpt.names().size(), n);
  const auto& router = ckpt.tensor("model.layers.1.block_sparse_moe.gate.weight");
  EXPECT_EQ(router.shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(router.type, DType::f32);
}

}  // namespace
}  // namespace troupe
