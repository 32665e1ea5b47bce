// Command-line conventions shared by every PSTrain program (ps-net, ps-data,
// ps-worker, ps-server).
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <utility>
#include <vector>

namespace pstrain {

// The Boost.Program_options style every program parses with: Boost's default
// plus allow_long_disguise, so that Caffe's single-dash spellings
// `-solver s.prototxt` and `-solver=s.prototxt` mean `--solver s.prototxt`.
// Pass it to command_line_parser::style().
int CommandLineStyle();

// Environment variables as flags, for a launch by hand or by another scheduler
// (docs/user-guide.md, "Environment variables"). Every option --some-flag may
// be set by PSTRAIN_SOME_FLAG; `aliases` adds other names ({"RANK", "rank"},
// {"DMLC_NUM_WORKER", "workers"}), the PSTRAIN_ name winning over an alias.
// A flag on the command line wins over both. Call after storing the command
// line into `vm` and before po::notify. Throws boost::program_options::error
// with the variable's name in the message when a value does not parse.
using EnvironmentAliases = std::vector<std::pair<std::string, std::string>>;
void StoreEnvironment(const boost::program_options::options_description& desc,
                      const EnvironmentAliases& aliases,
                      boost::program_options::variables_map& vm);

// What --version prints: "<program> <PSTrain version>", e.g. "ps-net 0.1.0".
std::string VersionLine(const std::string& program);

}  // namespace pstrain
