// `troupe`: the command-line front end of the library (generate, embed,
// rerank, serve, bench, stage). Errors are printed with their kind and end the process with 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "core/error.hpp"
#include "tools/cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Troupe: an actor-based LLM inference engine"};
  app.require_subcommand(1);
  troupe::cli::add_generate_command(app);
#ifdef TROUPE_HAVE_STAGE
  troupe::cli::add_stage_command(app);
  troupe::cli::add_embed_command(app);
  troupe::cli::add_rerank_command(app);
#endif
#ifdef TROUPE_HAVE_SERVE
  troupe::cli::add_serve_command(app);
  troupe::cli::add_bench_command(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const troupe::Error& e) {
    std::fprintf(stderr, "troupe: error (%s): %s\n", troupe::to_string(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
