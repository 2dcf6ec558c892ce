// Subcommands whose implementation is not part of this build still answer --help and explain why
// they cannot run, instead of being missing.
#include "commands.h"

namespace echo::cli {

void register_unavailable(CLI::App& app, const std::string& name, const std::string& description,
                          const std::string& reason) {
  CLI::App* command = app.add_subcommand(name, description + " (unavailable: " + reason + ")");
  command->allow_extras();
  command->callback([name, reason] { fail(name, kExitFailure, "not available in this build: " + reason); });
}

}  // namespace echo::cli
