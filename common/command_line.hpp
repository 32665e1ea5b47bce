// Command-line conventions shared by every PSTrain program (ps-net, ps-data,
// ps-worker, ps-server).
#pragma once

#include <string>

namespace pstrain {

// The Boost.Program_options style every program parses with: Boost's default
// plus allow_long_disguise, so that Caffe's single-dash spellings
// `-solver s.prototxt` and `-solver=s.prototxt` mean `--solver s.prototxt`.
// Pass it to command_line_parser::style().
int CommandLineStyle();

// What --version prints: "<program> <PSTrain version>", e.g. "ps-net 0.1.0".
std::string VersionLine(const std::string& program);

}  // namespace pstrain
