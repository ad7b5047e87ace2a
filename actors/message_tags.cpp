// Message -> span tags, for each pipeline message type (see message_tags.hpp).
#include "actors/message_tags.hpp"

#include <caf/rtti_pair.hpp>

#include "actors/messages.hpp"

namespace troupe {
namespace {

template <class T>
const T* element(const caf::type_erased_tuple& c, size_t pos) {
  if (c.size() <= pos || !c.matches(pos, caf::make_rtti_pair<T>())) return nullptr;
  return &c.get_as<T>(pos);
}

}  // namespace

SpanTags tag_message(const caf::type_erased_tuple& c, std::vector<int64_t>& ids) {
  ids.clear();
  SpanTags t;
  auto done = [&](const char* name) {
    t.message = name;
    t.requests = ids;
    return t;
  };
  if (c.empty()) return done("empty");
  if (const auto* m = element<StageBatch>(c, 0)) {
    for (const StageSeq& s : m->seqs) ids.push_back(s.id);
    t.step = m->step;
    t.engine = m->engine;
    return done("StageBatch");
  }
  if (const auto* m = element<StepLogits>(c, 0)) {
    ids.assign(m->rows.begin(), m->rows.end());
    t.step = m->step;
    t.engine = m->engine;
    return done("StepLogits");
  }
  if (const auto* m = element<SampledStep>(c, 0)) {
    for (const SampledToken& s : m->tokens) ids.push_back(s.id);
    t.step = m->step;
    t.engine = m->engine;
    return done("SampledStep");
  }
  if (const auto* m = element<StepFailed>(c, 0)) {
    t.step = m->step;
    t.engine = m->engine;
    return done("StepFailed");
  }
  if (const auto* m = element<PromptRequest>(c, 0)) {
    ids.push_back(m->id);
    return done("PromptRequest");
  }
  if (const auto* m = element<PromptEvent>(c, 0)) {
    ids.push_back(m->id);
    return done("PromptEvent");
  }
  if (element<TokenizeQuery>(c, 0) != nullptr) return done("TokenizeQuery");
  if (const auto* m = element<TokenRequest>(c, 0)) {
    ids.push_back(m->id);
    return done("TokenRequest");
  }
  if (const auto* m = element<RequestOpen>(c, 0)) {
    ids.push_back(m->id);
    return done("RequestOpen");
  }
  if (const auto* m = element<SeqOpen>(c, 0)) {
    ids.push_back(m->id);
    return done("SeqOpen");
  }
  if (const auto* m = element<SeqClose>(c, 0)) {
    ids.push_back(m->id);
    return done("SeqClose");
  }
  if (const auto* m = element<RequestDone>(c, 0)) {
    ids.push_back(m->id);
    return done("RequestDone");
  }
  // Atom-led messages: (cancel, id), (stop, id), wake, stats, ... Atom
  // constants travel as plain atom_values: compare the value, not the type.
  if (const auto* atom = element<caf::atom_value>(c, 0)) {
    const RequestId* id = element<RequestId>(c, 1);
    if (id != nullptr) ids.push_back(*id);
    if (*atom == cancel_atom::value) return done("cancel");
    if (*atom == stop_atom::value) return done("stop");
    if (*atom == wake_atom::value) return done("wake");
    if (*atom == stats_atom::value) return done("stats");
    if (*atom == kv_atom::value) return done("kv");
    if (*atom == shutdown_atom::value) return done("shutdown");
    if (*atom == caf::connect_atom::value) return done("connect");
    if (*atom == caf::add_atom::value) return done("add");
    return done("atom");
  }
  return done("other");
}

}  // namespace troupe
