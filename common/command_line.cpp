#include "common/command_line.hpp"

#include <boost/program_options/cmdline.hpp>

#ifndef PSTRAIN_VERSION
#error "PSTRAIN_VERSION must be defined (the CMake project's version)"
#endif

namespace pstrain {

int CommandLineStyle() {
  namespace style = boost::program_options::command_line_style;
  return style::default_style | style::allow_long_disguise;
}

std::string VersionLine(const std::string& program) { return program + " " PSTRAIN_VERSION; }

}  // namespace pstrain
