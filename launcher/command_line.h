#pragma once

// What the `sray` command line needs beyond CLI11: number checks that say
// what they want in words (CLI11's Range printed "not in range 0.000000 to"
// a 309-digit double), the error line of a failed parse, and srun's `--`
// before the program of `sray run`.
//
// Thread-safety: pure functions.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sray::launcher {

// A whole number from `lowest` to `highest`, decimal digits only.
CLI::Validator WholeNumberFrom(std::uint64_t lowest, std::uint64_t highest);

// The line for a failed parse of `arguments` (argv without the program),
// naming the help of the subcommand it was for: `sray: WHAT: see `sray run
// --help``; an unknown command is named with the list of commands.
std::string ParseErrorLine(const CLI::App& app, const CLI::ParseError& error,
                           const std::vector<std::string>& arguments);

// `sray run [options] -- PROGRAM ...` as srun takes it: the `--` that ends
// sray's own options (and only that one: one after PROGRAM is the
// program's) is dropped. `arguments` is argv without the program.
std::vector<std::string> WithoutRunSeparator(std::vector<std::string> arguments);

}  // namespace sray::launcher
