// Command-line conventions shared by every PSTrain program (ps-net, ps-data,
// ps-worker, ps-server), and the one flag-parsing block they all run
// (ParseFlags). ParseFlags is header-only, as environment_flags.hpp: the
// programs link Boost.Program_options, the libraries do not.
#pragma once

#include <boost/program_options.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/environment_flags.hpp"
#include "common/exit_code.hpp"

namespace pstrain {

// The Boost.Program_options style every program parses with: Boost's default
// plus allow_long_disguise, so that Caffe's single-dash spellings
// `-solver s.prototxt` and `-solver=s.prototxt` mean `--solver s.prototxt`.
// Pass it to command_line_parser::style().
int CommandLineStyle();

// What --version prints: "<program> <PSTrain version>", e.g. "ps-net 0.1.0".
std::string VersionLine(const std::string& program);

// What one program (or one ps-net command) parses, and how it answers.
struct FlagSpec {
  std::string program;  // "ps-server": --version's name and every error line's prefix
  // The flags. ParseFlags adds --help (-h) and --version unless present.
  boost::program_options::options_description* options = nullptr;
  boost::program_options::positional_options_description positional;
  // Non-null: PSTRAIN_<FLAG> variables and these aliases fill flags the
  // command line left out (environment_flags.hpp).
  const EnvironmentAliases* environment = nullptr;
  // String flags that must be given and not empty: "--solver is required".
  std::vector<std::string> required;
  // --help: prints this (stdout); empty: the options.
  std::function<void()> print_help;
  // A usage error: prints `message` and returns the exit code; empty:
  // "<program>: <message>" on stderr and kExitUsage.
  std::function<int(const std::string& message)> usage;
};

// Reports a usage error as `spec` says.
inline int UsageError(const FlagSpec& spec, const std::string& message) {
  if (spec.usage) return spec.usage(message);
  std::fprintf(stderr, "%s: %s\n", spec.program.c_str(), message.c_str());
  return kExitUsage;
}

// Parses `args` (the arguments after the program or command name) into `vm`
// with CommandLineStyle(), the environment when asked, notify and the
// required flags. Returns nullopt to go on, or the exit code for main to
// return now: 0 after printing --help or --version, UsageError's for a flag
// that does not parse, an unknown flag or a missing required one.
inline std::optional<int> ParseFlags(const std::vector<std::string>& args, FlagSpec& spec,
                                     boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  po::options_description& options = *spec.options;
  if (options.find_nothrow("help", false) == nullptr) {
    options.add_options()("help,h", "show this help");
  }
  if (options.find_nothrow("version", false) == nullptr) {
    options.add_options()("version", "print the version");
  }
  try {
    po::store(po::command_line_parser(args)
                  .options(options)
                  .positional(spec.positional)
                  .style(CommandLineStyle())
                  .run(),
              vm);
    if (spec.environment != nullptr) StoreEnvironment(options, *spec.environment, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return UsageError(spec, e.what());
  }
  if (vm.count("help")) {
    if (spec.print_help) {
      spec.print_help();
    } else {
      std::cout << options;
    }
    return 0;
  }
  if (vm.count("version")) {
    std::cout << VersionLine(spec.program) << "\n";
    return 0;
  }
  for (const std::string& flag : spec.required) {
    if (!vm.count(flag) || vm[flag].as<std::string>().empty()) {
      return UsageError(spec, "--" + flag + " is required");
    }
  }
  return std::nullopt;
}

// argv[1..argc) as ParseFlags takes them.
inline std::vector<std::string> ArgsAfterName(int argc, char** argv) {
  return argc > 1 ? std::vector<std::string>(argv + 1, argv + argc) : std::vector<std::string>{};
}

}  // namespace pstrain
