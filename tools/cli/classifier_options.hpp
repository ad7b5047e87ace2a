// `--classifier-from-token` and `--rerank-template`, taken by the commands
// that load a model to score with (serve, rerank, stage): a causal language
// model run as a reranker from its LM head's rows of some tokens, and the
// prompt its pairs are written into (ModelLoadOptions).
#pragma once

#include <string>

#include "model/model.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace troupe::cli {

struct ClassifierArgs {
  std::string tokens;         // "no,yes"; empty: as the model's files say
  std::string template_file;  // empty: the model's own
};

void add_classifier_options(CLI::App* cmd, ClassifierArgs* a);
// Sets what was given: the tokens split at commas, the template read from
// its file. Throws Error(io) for an unreadable file.
void apply_classifier_options(const ClassifierArgs& a, ModelLoadOptions& load);

}  // namespace troupe::cli
