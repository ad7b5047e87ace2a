// What a sampler asks of an output constraint: may the next token be this
// one, and which of the whole vocabulary may it be. The sampler applies it
// after penalties, before temperature and the filters, so top-k / top-p
// act on the tokens the constraint leaves (vLLM's order).
#pragma once

#include <cstdint>
#include <span>

namespace troupe {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Cheap: one token's bytes walked from the current state.
  virtual bool allows(int32_t token) = 0;
  // Sets logits[t] to -inf for every token t not allowed. logits: [n_vocab].
  virtual void mask(std::span<float> logits) = 0;
  // The token chosen: the state moves past it (it must be allowed).
  virtual void accept(int32_t token) = 0;
  // The output is complete and nothing may follow it.
  virtual bool done() const = 0;
};

}  // namespace troupe
