// remote_stage_options: the handshake's expectations of each remote stage.
#include "actors/pipeline_remote.hpp"

#include <chrono>
#include <string>

#include "actors/stage_handshake.hpp"
#include "core/error.hpp"
#include "model/model_identity.hpp"
#include "model/model_stage.hpp"

namespace troupe {

bool remote_tls(const RemoteSettings& rs) { return !rs.tls_cert.empty() || !rs.tls_key.empty() || !rs.tls_ca.empty(); }

std::vector<RemoteStageOptions> remote_stage_options(const Model& model, const std::vector<PlannedStage>& plan,
                                                     const PipelineConfig& config, const StageOptions& limits) {
  std::vector<RemoteStageOptions> out(plan.size());
  const RemoteSettings& rs = config.remote;
  const bool tls = remote_tls(rs);
  const std::string model_id = model_identity(model);
  const std::string model_name = model_display_name(model);
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!plan[i].is_remote()) continue;
    if (tls && (rs.tls_cert.empty() || rs.tls_key.empty() || rs.tls_ca.empty())) {
      throw Error(Errc::invalid_argument,
                  "PipelineConfig: remote.tls needs a certificate, a key and a CA file together");
    }
    StageOptions stage = limits;
    stage.first_layer = plan[i].first_layer;
    stage.last_layer = plan[i].last_layer;
    const auto [host, port] = parse_host_port(plan[i].remote);
    out[i] = {.host = host,
              .port = port,
              .secret = rs.secret,
              .expect = {.model_id = model_id,
                         .model_name = model_name,
                         .first_layer = plan[i].first_layer,
                         .last_layer = plan[i].last_layer,
                         .kv_blocks = config.n_kv_blocks,
                         .kv_block_size = config.kv_block_size,
                         .kv_dtype = kv_type_name(config.kv_type),
                         .max_tokens = limits.max_tokens,
                         .max_seqs = limits.max_seqs,
                         .state_slots = stage_state_slots(model.config(), stage),
                         .embedding_output = limits.embedding_output && plan[i].last_layer == model.config().n_layer},
              .step_timeout = std::chrono::milliseconds(rs.step_timeout_ms),
              .hello_timeout = std::chrono::milliseconds(rs.hello_timeout_ms),
              .tls = tls,
              .wire_version = rs.wire_version != 0 ? rs.wire_version : kStageWireVersion};
  }
  return out;
}

}  // namespace troupe
