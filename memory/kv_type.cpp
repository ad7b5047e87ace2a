// KV element types: names, the reference row conversions (kv_write and the
// tests use them; the attention kernels dequantize in registers instead) and
// the byte sizes `--kv-memory` takes.
#include "memory/kv_type.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace troupe {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::bf16: return "bf16";
    case KvType::q8_0: return "q8_0";
  }
  return "unknown";
}

KvType parse_kv_type(std::string_view name) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::q8_0}) {
    if (name == kv_type_name(t)) return t;
  }
  throw Error(Errc::invalid_argument,
              "unknown KV cache type \"" + std::string(name) + "\" (expected f32, f16, bf16 or q8_0)");
}

void kv_quantize_row(KvType t, const float* src, void* dst, int64_t head_dim) {
  switch (t) {
    case KvType::f32:
      std::memcpy(dst, src, static_cast<size_t>(head_dim) * sizeof(float));
      return;
    case KvType::f16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < head_dim; ++i) d[i] = f32_to_fp16(src[i]);
      return;
    }
    case KvType::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < head_dim; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case KvType::q8_0: {
      auto* qs = static_cast<int8_t*>(dst);
      auto* scales = static_cast<unsigned char*>(dst) + head_dim;  // unaligned: memcpy
      for (int64_t g0 = 0; g0 < head_dim; g0 += kKvQ8Group) {
        const int64_t n = std::min(kKvQ8Group, head_dim - g0);
        float amax = 0.0f;
        for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[g0 + i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int64_t i = 0; i < n; ++i) qs[g0 + i] = static_cast<int8_t>(std::lround(src[g0 + i] * id));
        const uint16_t h = f32_to_fp16(d);
        std::memcpy(scales + 2 * (g0 / kKvQ8Group), &h, 2);
      }
      return;
    }
  }
}

void kv_dequantize_row(KvType t, const void* src, float* dst, int64_t head_dim) {
  switch (t) {
    case KvType::f32:
      std::memcpy(dst, src, static_cast<size_t>(head_dim) * sizeof(float));
      return;
    case KvType::f16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < head_dim; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case KvType::bf16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < head_dim; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case KvType::q8_0: {
      const auto* qs = static_cast<const int8_t*>(src);
      const auto* scales = static_cast<const unsigned char*>(src) + head_dim;
      for (int64_t i = 0; i < head_dim; ++i) {
        uint16_t h;
        std::memcpy(&h, scales + 2 * (i / kKvQ8Group), 2);
        dst[i] = fp16_to_f32(h) * static_cast<float>(qs[i]);
      }
      return;
    }
  }
}

int64_t parse_byte_size(std::string_view text) {
  const std::string s(text);
  auto fail = [&]() -> int64_t {
    throw Error(Errc::invalid_argument, "bad byte size \"" + s +
                                            "\" (expected a positive number with an optional suffix K, M, G, "
                                            "KiB, MiB or GiB, e.g. 2GiB)");
  };
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return fail();
  double value = 0;
  try {
    value = std::stod(s.substr(0, i));
  } catch (const std::exception&) {
    return fail();
  }
  std::string unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  double mult = 0;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB") mult = 1e3;
  else if (unit == "M" || unit == "MB") mult = 1e6;
  else if (unit == "G" || unit == "GB") mult = 1e9;
  else if (unit == "KiB") mult = 1024.0;
  else if (unit == "MiB") mult = 1024.0 * 1024.0;
  else if (unit == "GiB") mult = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "TiB") mult = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else return fail();
  const double bytes = value * mult;
  if (!(bytes >= 1.0) || bytes > 9.0e18) return fail();
  return static_cast<int64_t>(bytes);
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
  } else if (b >= 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024.0));
  } else if (b >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  }
  return buf;
}

}  // namespace troupe
