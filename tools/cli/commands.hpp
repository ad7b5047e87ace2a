// The `troupe` program's subcommands; each file adds one to the CLI11 app.
#pragma once

namespace CLI {
class App;
}

namespace troupe::cli {

void add_generate_command(CLI::App& app);

}  // namespace troupe::cli
