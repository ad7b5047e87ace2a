// Structurally broken GGUF files: each is a valid file from GgufWriter with
// bytes changed or cut, and must fail to open with an Error that names the
// file and the problem, never a crash or a read past the end (ASan checks).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "model/gguf_writer.hpp"
#include "tests/model/gguf_test_util.hpp"

namespace troupe::gguf {
namespace {

using namespace troupe::gguf::test;

// Header: magic(4) version(4) n_tensors(8) n_kv(8); then the first key.
constexpr size_t kVersionAt = 4, kTensorCountAt = 8, kKvCountAt = 16, kFirstKeyAt = 24;

// A small valid file: one string, one string array, one u32 array, two tensors.
std::vector<uint8_t> sample_bytes(uint32_t alignment = 32) {
  GgufWriter w({.alignment = alignment});
  w.add_string("general.architecture", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  w.add("numbers", Array{std::vector<uint32_t>(100, 7)});
  w.add_tensor("a.weight", DType::f32, {8, 2}, f32_bytes(std::vector<float>(16, 1.0f)));
  w.add_tensor("b.weight", DType::q8_0, {32, 2}, std::vector<uint8_t>(2 * sizeof(BlockQ8_0), 0));
  const std::string path = temp_path("sample_source");
  w.write(path);
  return read_bytes(path);
}

std::string write_case(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = temp_path("bad_" + name);
  write_bytes(path, bytes);
  return path;
}

std::vector<uint8_t> cut(std::vector<uint8_t> bytes, size_t n) {
  bytes.resize(n);
  return bytes;
}

TEST(GgufErrors, SampleIsValid) {
  const GgufFile f = GgufFile::open(write_case("valid", sample_bytes()));
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 3u);
}

TEST(GgufErrors, MissingAndEmptyFile) {
  const std::string missing = temp_path("does_not_exist");
  expect_open_error(missing, Errc::io, {"cannot open"});
  expect_open_error(write_case("empty", {}), Errc::bad_format, {"unexpected end of file", "magic"});
}

TEST(GgufErrors, WrongMagic) {
  auto b = sample_bytes();
  b[0] = 'X';
  expect_open_error(write_case("magic", b), Errc::bad_format, {"not a GGUF file", "bad magic 'XGUF'"});
  b[3] = 0x01;
  expect_open_error(write_case("magic_bin", b), Errc::bad_format, {"bad magic 'XGU\\x01'"});
}

TEST(GgufErrors, UnsupportedVersion) {
  auto b = sample_bytes();
  poke<uint32_t>(b, kVersionAt, 4);
  expect_open_error(write_case("version4", b), Errc::unsupported, {"unsupported GGUF version 4"});
  poke<uint32_t>(b, kVersionAt, 1);
  expect_open_error(write_case("version1", b), Errc::unsupported, {"unsupported GGUF version 1"});
  poke<uint32_t>(b, kVersionAt, 0x03000000u);
  expect_open_error(write_case("big_endian", b), Errc::unsupported, {"big-endian"});
}

TEST(GgufErrors, TruncatedHeader) {
  expect_open_error(write_case("header", cut(sample_bytes(), 12)), Errc::bad_format,
                    {"unexpected end of file reading the tensor count at offset 8"});
}

TEST(GgufErrors, TruncatedInString) {
  // One key and no tensors, so the header's counts stay plausible however
  // short the file gets and the string itself is what runs out.
  GgufWriter w;
  w.add_string("general.architecture", std::string(100, 'x'));
  const std::string path = temp_path("string_source");
  w.write(path);
  const auto b = read_bytes(path);
  expect_open_error(write_case("in_key", cut(b, kFirstKeyAt + 8 + 5)), Errc::bad_format,
                    {"metadata key #0: string length 20 at offset 24", "past end of file"});
  const size_t value_at = find_bytes(b, "xxxx");
  expect_open_error(write_case("in_value", cut(b, value_at + 50)), Errc::bad_format,
                    {"key 'general.architecture': string length 100", "past end of file (50 bytes left)"});
}

TEST(GgufErrors, TruncatedInArray) {
  const auto b = sample_bytes();
  // Inside the third token string, "</s>".
  expect_open_error(write_case("in_string_array", cut(b, find_bytes(b, "</s>") + 1)), Errc::bad_format,
                    {"key 'tokenizer.ggml.tokens' element 2", "past end of file"});
  // Inside the u32 array: 100 elements no longer fit.
  const size_t numbers_at = find_bytes(b, "numbers") + 7 + 4 + 4 + 8;  // key, type, elem type, count
  expect_open_error(write_case("in_u32_array", cut(b, numbers_at + 50)), Errc::bad_format,
                    {"key 'numbers' array element count 100 is impossible"});
  // Inside an array's element type.
  expect_open_error(write_case("in_array_header", cut(b, find_bytes(b, "numbers") + 7 + 4 + 2)), Errc::bad_format,
                    {"unexpected end of file reading key 'numbers' array element type"});
}

TEST(GgufErrors, TruncatedInTensorTable) {
  const auto b = sample_bytes();
  const TensorInfoAt at = tensor_info_at(b, "b.weight", 2);
  expect_open_error(write_case("in_dims", cut(b, at.dims + 3)), Errc::bad_format,
                    {"unexpected end of file reading tensor 'b.weight' dimension 0"});
  expect_open_error(write_case("in_offset", cut(b, at.offset + 7)), Errc::bad_format,
                    {"unexpected end of file reading tensor 'b.weight' offset"});
}

// The hostile file: a valid header claiming 2^40 tensors (and one
// claiming 2^40 metadata pairs) is refused from the counts alone, before
// anything is sized by them (tests/fuzz/gguf_model_fuzz.cpp runs the reader
// under a 512 MB allocation limit).
TEST(GgufErrors, TwoToTheFortyTensors) {
  auto b = sample_bytes();
  poke<uint64_t>(b, kTensorCountAt, uint64_t{1} << 40);
  expect_open_error(write_case("tensors_2_40", b), Errc::bad_format,
                    {"tensor count 1099511627776 is impossible", "entries of at least 24 bytes cannot fit"});
  b = sample_bytes();
  poke<uint64_t>(b, kKvCountAt, uint64_t{1} << 40);
  expect_open_error(write_case("kvs_2_40", b), Errc::bad_format, {"metadata count 1099511627776 is impossible"});
}

TEST(GgufErrors, AbsurdCounts) {
  auto b = sample_bytes();
  poke<uint64_t>(b, kTensorCountAt, uint64_t{1} << 62);
  expect_open_error(write_case("tensor_count", b), Errc::bad_format, {"tensor count 4611686018427387904 is impossible"});

  b = sample_bytes();
  poke<uint64_t>(b, kKvCountAt, ~uint64_t{0});
  expect_open_error(write_case("kv_count", b), Errc::bad_format, {"metadata count 18446744073709551615 is impossible"});

  b = sample_bytes();
  poke<uint64_t>(b, kFirstKeyAt, uint64_t{1} << 60);  // the first key's length
  expect_open_error(write_case("string_length", b), Errc::bad_format,
                    {"string length 1152921504606846976", "past end of file"});

  b = sample_bytes();
  const size_t count_at = find_bytes(b, "tokenizer.ggml.tokens") + 21 + 4 + 4;
  poke<uint64_t>(b, count_at, uint64_t{1} << 61);
  expect_open_error(write_case("array_count", b), Errc::bad_format,
                    {"key 'tokenizer.ggml.tokens' array element count 2305843009213693952 is impossible"});

  b = sample_bytes();
  poke<uint64_t>(b, tensor_info_at(b, "a.weight", 2).dims + 8, uint64_t{1} << 62);
  expect_open_error(write_case("dims_overflow", b), Errc::bad_format,
                    {"tensor 'a.weight' has an element count that overflows 64 bits"});
}

TEST(GgufErrors, BadValues) {
  auto b = sample_bytes();
  poke<uint32_t>(b, find_bytes(b, "numbers") + 7, 13);  // the value type
  expect_open_error(write_case("value_type", b), Errc::bad_format, {"key 'numbers' has unknown value type 13"});

  b = sample_bytes();
  poke<uint32_t>(b, find_bytes(b, "numbers") + 7 + 4, 42);  // the array's element type
  expect_open_error(write_case("elem_type", b), Errc::bad_format, {"key 'numbers' array element has unknown value type 42"});

  GgufWriter w;
  w.add_bool("flag", true);
  const std::string path = temp_path("bool_source");
  w.write(path);
  b = read_bytes(path);
  b[find_bytes(b, "flag") + 4 + 4] = 2;
  expect_open_error(write_case("bool", b), Errc::bad_format, {"key 'flag' has bool value 2"});
}

TEST(GgufErrors, DeeplyNestedArray) {
  Array a{std::vector<int8_t>{1}};
  for (int i = 0; i < 9; ++i) a = Array{std::vector<Array>{a}};
  GgufWriter w;
  w.add_array("deep", a);
  const std::string path = temp_path("deep");
  w.write(path);
  expect_open_error(path, Errc::bad_format, {"key 'deep'", "nests arrays deeper than 8"});
}

TEST(GgufErrors, UnknownDtype) {
  auto b = sample_bytes();
  const TensorInfoAt at = tensor_info_at(b, "b.weight", 2);
  poke<uint32_t>(b, at.type, 16);
  expect_open_error(write_case("iq2_xxs", b), Errc::unsupported,
                    {"tensor 'b.weight' has ggml type 16 (iq2_xxs), which Troupe does not support"});
  // q2_K and q3_K open but keep their block rules: rows of 32 are not whole
  // 256-weight super-blocks.
  poke<uint32_t>(b, at.type, 10);
  expect_open_error(write_case("q2_k", b), Errc::bad_format,
                    {"tensor 'b.weight' row length 32 is not a multiple of the q2_K block size 256"});
  poke<uint32_t>(b, at.type, 11);
  expect_open_error(write_case("q3_k", b), Errc::bad_format,
                    {"tensor 'b.weight' row length 32 is not a multiple of the q3_K block size 256"});
  poke<uint32_t>(b, at.type, 1000);
  expect_open_error(write_case("dtype_1000", b), Errc::unsupported, {"ggml type 1000 (unknown)"});
}

TEST(GgufErrors, TooManyDims) {
  auto b = sample_bytes();
  poke<uint32_t>(b, tensor_info_at(b, "b.weight", 2).n_dims, 5);
  expect_open_error(write_case("n_dims", b), Errc::bad_format, {"tensor 'b.weight' has 5 dimensions (at most 4)"});
}

TEST(GgufErrors, RowNotMultipleOfBlock) {
  auto b = sample_bytes();
  const TensorInfoAt at = tensor_info_at(b, "b.weight", 2);
  poke<uint64_t>(b, at.dims, 16);  // [16, 4]: same element count, rows split a block
  poke<uint64_t>(b, at.dims + 8, 4);
  expect_open_error(write_case("row_block", b), Errc::bad_format,
                    {"tensor 'b.weight' row length 16 is not a multiple of the q8_0 block size 32"});
}

TEST(GgufErrors, TensorDataOutsideFile) {
  auto b = sample_bytes();
  poke<uint64_t>(b, tensor_info_at(b, "b.weight", 2).offset, uint64_t{1} << 40);
  expect_open_error(write_case("offset_far", b), Errc::bad_format, {"tensor 'b.weight' data", "lies outside the file"});

  // Offsets near 2^64 must not wrap around into the file.
  b = sample_bytes();
  poke<uint64_t>(b, tensor_info_at(b, "b.weight", 2).offset, ~uint64_t{31});
  expect_open_error(write_case("offset_wrap", b), Errc::bad_format, {"lies outside the file"});

  // The data section cut short: the last tensor's bytes are missing.
  b = sample_bytes();
  expect_open_error(write_case("data_cut", cut(b, b.size() - 40)), Errc::bad_format,
                    {"tensor 'b.weight' data (68 bytes", "lies outside the file"});
}

TEST(GgufErrors, MisalignedOffset) {
  auto b = sample_bytes();
  poke<uint64_t>(b, tensor_info_at(b, "b.weight", 2).offset, 68);
  expect_open_error(write_case("misaligned", b), Errc::bad_format,
                    {"tensor 'b.weight' offset 68 is not a multiple of the alignment 32"});

  b = sample_bytes(64);
  poke<uint32_t>(b, find_bytes(b, "general.alignment") + 17 + 4, 48);
  expect_open_error(write_case("alignment_48", b), Errc::bad_format, {"general.alignment 48 is not a power of two"});
}

TEST(GgufErrors, DuplicateNames) {
  auto b = sample_bytes();
  b[tensor_info_at(b, "b.weight", 2).n_dims - 8] = 'a';  // "b.weight" -> "a.weight"
  expect_open_error(write_case("dup_tensor", b), Errc::bad_format, {"duplicate tensor name 'a.weight'"});

  GgufWriter w;
  w.add_u32("key.one", 1);
  w.add_u32("key.two", 2);
  const std::string path = temp_path("dup_key_source");
  w.write(path);
  b = read_bytes(path);
  const size_t two = find_bytes(b, "key.two");
  b[two + 4] = 'o', b[two + 5] = 'n', b[two + 6] = 'e';
  expect_open_error(write_case("dup_key", b), Errc::bad_format, {"duplicate key 'key.one'"});
}

// Whatever the damage, opening either succeeds or throws troupe::Error: cut
// the file at every length and overwrite each header byte with a few values.
TEST(GgufErrors, EveryTruncationAndCorruptionIsCaught) {
  const auto good = sample_bytes();
  const std::string path = temp_path("fuzz");
  auto open_is_safe = [&](const std::vector<uint8_t>& b, const std::string& what) {
    write_bytes(path, b);
    try {
      GgufFile::open(path);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not a troupe::Error: " << e.what();
    }
  };
  const GgufFile f = GgufFile::open(write_case("fuzz_source", good));
  const size_t data_start = f.data_offset();
  const TensorInfo& last = f.tensors().back();
  // Past the last tensor's bytes only alignment padding is cut: still valid.
  const size_t data_end = data_start + last.offset + static_cast<size_t>(last.n_bytes);
  for (size_t n = 0; n < data_end; ++n) {
    write_bytes(path, cut(good, n));
    EXPECT_THROW(GgufFile::open(path), Error) << "cut at " << n;
  }
  for (size_t i = 0; i < data_start; ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0x01}, uint8_t{0x7f}, uint8_t{0xff}}) {
      auto b = good;
      b[i] = v;
      open_is_safe(b, "byte " + std::to_string(i) + " = " + std::to_string(v));
    }
  }
}

}  // namespace
}  // namespace troupe::gguf
