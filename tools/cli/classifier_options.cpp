#include "tools/cli/classifier_options.hpp"

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace troupe::cli {

void add_classifier_options(CLI::App* cmd, ClassifierArgs* a) {
  cmd->add_option("--classifier-from-token", a->tokens,
                  "Run a causal LM as a reranker from its LM head's rows of these tokens, as vLLM's "
                  "classifier_from_token: one (\"Yes\": its logit) or two (\"no,yes\": the second's probability "
                  "against the first's); a stage worker must be given the same");
  cmd->add_option("--rerank-template", a->template_file,
                  "A file holding a causal reranker's prompt for a pair, {query} and {document} standing for the "
                  "texts (default: the model's own)");
}

void apply_classifier_options(const ClassifierArgs& a, ModelLoadOptions& load) {
  if (!a.tokens.empty()) {
    load.classifier_from_token.clear();
    std::stringstream list(a.tokens);
    for (std::string t; std::getline(list, t, ',');) load.classifier_from_token.push_back(t);
  }
  if (!a.template_file.empty()) {
    std::ifstream in(a.template_file, std::ios::binary);
    if (!in) throw Error(Errc::io, "--rerank-template: cannot read " + a.template_file);
    std::ostringstream text;
    text << in.rdbuf();
    load.rerank_template = text.str();
  }
}

}  // namespace troupe::cli
