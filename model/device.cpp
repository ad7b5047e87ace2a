// Device names and backends for them. The CUDA backend is linked in only
// where the toolkit was found (TROUPE_HAVE_CUDA); elsewhere a CUDA device
// is a clear start-up error, never a crash.
#include "model/device.hpp"

#include <charconv>
#include <cstdio>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#ifdef TROUPE_HAVE_CUDA
#include "kernels/cuda_backend.hpp"
#endif

namespace troupe {
namespace {

[[maybe_unused]] std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / double(1ull << 30));
  return buf;
}

}  // namespace

std::string Device::str() const { return is_cuda() ? "cuda:" + std::to_string(index) : "cpu"; }

Device parse_device(std::string_view text) {
  if (text == "cpu") return {};
  if (text == "cuda" || text == "gpu") return {.kind = DeviceKind::cuda, .index = 0};
  if (text.starts_with("cuda:")) {
    const std::string_view n = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (ec == std::errc{} && end == n.data() + n.size() && !n.empty() && index >= 0) {
      return {.kind = DeviceKind::cuda, .index = index};
    }
  }
  throw Error(Errc::invalid_argument,
              "unknown device '" + std::string(text) + "': use cpu, cuda or cuda:N (N a GPU index)");
}

std::unique_ptr<Backend> open_backend(const Device& device, int threads, const DeviceNeeds& needs) {
  if (!device.is_cuda()) return std::make_unique<CpuBackend>(CpuBackendOptions{.n_threads = threads});
#ifndef TROUPE_HAVE_CUDA
  (void)needs;
  throw Error(Errc::unsupported, "device " + device.str() +
                                     ": this build of Troupe has no CUDA backend (configure it where the CUDA "
                                     "toolkit is installed)");
#else
  std::string why;
  if (!cuda_available(&why)) {
    const std::string prefix = "no usable CUDA device: ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    throw Error(Errc::unsupported,
                "device " + device.str() + ": no usable CUDA GPU or driver on this machine (" + why + ")");
  }
  const int n = cuda_device_count();
  if (device.index >= n) {
    throw Error(Errc::invalid_argument, "device " + device.str() + " does not exist: this machine has " +
                                            std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") +
                                            " (cuda:0" + (n > 1 ? "..cuda:" + std::to_string(n - 1) : "") + ")");
  }
  // Weights keep the file's precision (f32 stays f32), so a GPU stage
  // computes what the CPU stage would; bf16/f16/quantized files stay compact.
  auto backend = std::make_unique<CudaBackend>(
      CudaBackendOptions{.device = device.index, .f32_weights = WeightPrecision::f32});
  // The backend's workspace and staging buffers are already taken from the
  // free bytes; what the stage will allocate must fit in the rest.
  const size_t need = needs.weight_bytes + needs.kv_bytes + needs.arena_bytes;
  const size_t free_bytes = backend->free_device_memory();
  if (need > free_bytes) {
    throw Error(Errc::out_of_memory,
                "device " + device.str() + " (" + backend->device_name() + ") has " + gib(free_bytes) +
                    " free but the stage needs " + gib(need) + " (weights " + gib(needs.weight_bytes) + " + KV " +
                    gib(needs.kv_bytes) + " + step arena " + gib(needs.arena_bytes) +
                    "): put fewer layers on it, or lower the KV blocks or the step size");
  }
  return backend;
#endif
}

}  // namespace troupe
