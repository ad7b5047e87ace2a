// One encoder layer of a vision tower, bound from a source that names its
// tensors per layer: a checkpoint's (HfWeights) or an mmproj's
// (vision_mmproj.cpp). Both towers are the same pre-LayerNorm block with
// biases everywhere; only the names differ. Internal to vision/.
#pragma once

#include <cstdint>
#include <string>

#include "model/model.hpp"

namespace troupe::vision {

// Each name is followed by ".weight" and ".bias".
struct TowerLayerNames {
  std::string norm1, q, k, v, out, norm2, up, down;
};

// Source: vector(name, n) -> const float*, matrix(name, n_in, n_out) -> Weight.
template <class Source>
void bind_tower_layer(Source& src, const TowerLayerNames& n, int64_t hidden, int64_t n_ff, LayerWeights& l) {
  const int64_t h = hidden;
  l.attn_norm = src.vector(n.norm1 + ".weight", h);
  l.attn_norm_b = src.vector(n.norm1 + ".bias", h);
  l.wq = src.matrix(n.q + ".weight", h, h);
  l.wk = src.matrix(n.k + ".weight", h, h);
  l.wv = src.matrix(n.v + ".weight", h, h);
  l.wo = src.matrix(n.out + ".weight", h, h);
  l.bq = src.vector(n.q + ".bias", h);
  l.bk = src.vector(n.k + ".bias", h);
  l.bv = src.vector(n.v + ".bias", h);
  l.bo = src.vector(n.out + ".bias", h);
  l.ffn_norm = src.vector(n.norm2 + ".weight", h);
  l.ffn_norm_b = src.vector(n.norm2 + ".bias", h);
  l.w_up = src.matrix(n.up + ".weight", h, n_ff);
  l.b_up = src.vector(n.up + ".bias", n_ff);
  l.w_down = src.matrix(n.down + ".weight", n_ff, h);
  l.b_down = src.vector(n.down + ".bias", h);
}

}  // namespace troupe::vision
