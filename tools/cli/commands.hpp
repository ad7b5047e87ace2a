// The `troupe` program's subcommands; each file adds one to the CLI11 app.
#pragma once

namespace CLI {
class App;
}

namespace troupe::cli {

void add_generate_command(CLI::App& app);
// Only in builds with the network edge (TROUPE_HAVE_SERVE; not engine-only).
void add_serve_command(CLI::App& app);
void add_bench_command(CLI::App& app);
// Builds with the actor layer (TROUPE_HAVE_STAGE).
void add_stage_command(CLI::App& app);
void add_embed_command(CLI::App& app);
void add_rerank_command(CLI::App& app);

}  // namespace troupe::cli
