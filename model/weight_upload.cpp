#include "model/weight_upload.hpp"

#include <string>

#include "core/error.hpp"

namespace troupe {

const float* upload_vector(Backend& backend, const float* host, int64_t n, std::vector<void*>& owned) {
  if (host == nullptr) return nullptr;
  const Weight w = backend.upload_weight({.data = host, .type = DType::f32, .n_in = n, .n_out = 1});
  if (w.data != host) owned.push_back(const_cast<void*>(w.data));
  return static_cast<const float*>(w.data);
}

Weight upload_table(Backend& backend, const Weight& host, std::vector<void*>& owned) {
  if (host.data == nullptr) return host;
  const Weight w = backend.upload_weight(host);
  if (w.data != host.data) owned.push_back(const_cast<void*>(w.data));
  return w;
}

Weight upload_matrix(Backend& backend, const Weight& host, std::vector<void*>& owned) {
  if (host.data == nullptr) return host;
  if (host.lora != nullptr && !backend.runs_lora()) {
    throw Error(Errc::unsupported,
                "LoRA adapters (--lora) run on cpu stages; this stage's device is " + std::string(backend.name()));
  }
  const Weight w = backend.prepare_matmul(upload_table(backend, host, owned));
  if (w.packed != nullptr) owned.push_back(const_cast<void*>(w.packed));
  return w;
}

}  // namespace troupe
