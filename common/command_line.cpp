#include "common/command_line.hpp"

#include <boost/program_options/cmdline.hpp>
#include <cctype>
#include <cstdlib>

#ifndef PSTRAIN_VERSION
#error "PSTRAIN_VERSION must be defined (the CMake project's version)"
#endif

namespace pstrain {

int CommandLineStyle() {
  namespace style = boost::program_options::command_line_style;
  return style::default_style | style::allow_long_disguise;
}

namespace {

// "PSTRAIN_NUM_SERVERS" -> "num-servers"; "" when `variable` has no PSTRAIN_ prefix.
std::string FlagOf(const std::string& variable) {
  const std::string prefix = "PSTRAIN_";
  if (variable.rfind(prefix, 0) != 0) return "";
  std::string flag = variable.substr(prefix.size());
  for (char& ch : flag) {
    ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return flag;
}

}  // namespace

void StoreEnvironment(const boost::program_options::options_description& desc,
                      const EnvironmentAliases& aliases,
                      boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  // (variable, flag) in priority order: every PSTRAIN_ name, then the aliases.
  std::vector<std::pair<std::string, std::string>> names;
  for (const auto& option : desc.options()) {
    std::string variable = "PSTRAIN_" + option->long_name();
    for (char& ch : variable) {
      ch = ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    if (FlagOf(variable) == option->long_name()) names.emplace_back(variable, option->long_name());
  }
  names.insert(names.end(), aliases.begin(), aliases.end());
  for (const auto& [variable, flag] : names) {
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr || flag == "help" || flag == "version") continue;
    if (vm.count(flag) > 0 && !vm[flag].defaulted()) continue;  // the flag or a stronger name
    const po::option_description* option = desc.find_nothrow(flag, false);
    if (option == nullptr) continue;
    const bool is_switch = option->semantic()->max_tokens() == 0;
    const std::string text = value;
    if (is_switch && (text.empty() || text == "0" || text == "false")) continue;
    po::parsed_options parsed(&desc);
    po::option item;
    item.string_key = flag;
    if (!is_switch) item.value.push_back(text);
    parsed.options.push_back(item);
    try {
      if (vm.count(flag) > 0) vm.erase(flag);  // a default gives way
      po::store(parsed, vm);
    } catch (const po::error& e) {
      throw po::error("environment variable " + variable + "='" + value + "': " + e.what());
    }
  }
}

std::string VersionLine(const std::string& program) { return program + " " PSTRAIN_VERSION; }

}  // namespace pstrain
