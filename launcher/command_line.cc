#include "command_line.h"

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace sray::launcher {

CLI::Validator WholeNumberFrom(std::uint64_t lowest, std::uint64_t highest) {
  const std::string wanted =
      "a whole number from " + std::to_string(lowest) + " to " + std::to_string(highest);
  return CLI::Validator(
      [lowest, highest, wanted](const std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.size() <= 19 &&
            std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) return "'" + text + "' is not " + wanted;
        const std::uint64_t value = std::stoull(text);
        if (value < lowest || value > highest) return text + " is not " + wanted;
        return {};
      },
      "NUMBER");
}

std::string ParseErrorLine(const CLI::App& app, const CLI::ParseError& error,
                           const std::vector<std::string>& arguments) {
  // The subcommand the failed parse was in, deepest first.
  std::string path;
  const CLI::App* at = &app;
  for (;;) {
    const auto chosen = at->get_subcommands();
    if (chosen.empty()) break;
    at = chosen.front();
    path += " " + at->get_name();
  }
  if (path.empty() && !arguments.empty() && !arguments.front().starts_with('-')) {
    std::string commands;
    for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + command->get_name();
    }
    return "sray: unknown command '" + arguments.front() + "': the commands are " + commands +
           " (see `sray --help`)";
  }
  return "sray" + path + ": " + error.what() + ": see `sray" + path + " --help`";
}

std::vector<std::string> WithoutRunSeparator(std::vector<std::string> arguments) {
  // The command is the first word that is no option (sray's own are
  // --help and --version); then run's options: flags, and options whose
  // value is the next word unless given as -N2 or --nodes=2.
  const auto run = std::find_if(arguments.begin(), arguments.end(),
                                [](const std::string& word) { return !word.starts_with('-'); });
  if (run == arguments.end() || *run != "run") return arguments;
  for (auto word = run + 1; word != arguments.end(); ++word) {
    const std::string_view text(*word);
    if (text == "--") {
      arguments.erase(word);
      break;
    }
    if (!text.starts_with('-')) break;  // PROGRAM
    if (text == "-l" || text == "--label") continue;
    const bool takes_next = text == "-N" || text == "--nodes" || text == "--tasks-per-node" ||
                            text == "--cpus-per-node" || text == "--mem-per-node" ||
                            text == "--ray-cluster";
    if (takes_next) {
      if (++word == arguments.end()) break;
      continue;
    }
    const bool joined = (text.starts_with("-N") && text.size() > 2) ||
                        (text.starts_with("--") && text.find('=') != std::string_view::npos);
    if (!joined) break;  // an option CLI11 will name
  }
  return arguments;
}

}  // namespace sray::launcher
