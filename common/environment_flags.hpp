// Environment variables as flags, for a launch by hand or by another scheduler
// (docs/user-guide.md, "By hand, or from another scheduler"). Header-only: the
// programs that parse flags link Boost.Program_options; the libraries do not.
//
// Every option --some-flag may be set by PSTRAIN_SOME_FLAG; `aliases` adds
// other names ({"RANK", "rank"}, {"DMLC_NUM_WORKER", "workers"}), a PSTRAIN_
// name winning over an alias and a flag on the command line over both. A
// switch (no value) is set unless the variable is empty, 0 or false.
#pragma once

#include <boost/program_options.hpp>
#include <cctype>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace pstrain {

using EnvironmentAliases = std::vector<std::pair<std::string, std::string>>;

// Call after storing the command line into `vm` and before po::notify. Throws
// boost::program_options::error naming the variable when a value does not parse.
inline void StoreEnvironment(const boost::program_options::options_description& desc,
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
    names.emplace_back(variable, option->long_name());
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
      throw po::error("environment variable " + variable + "='" + text + "': " + e.what());
    }
  }
}

}  // namespace pstrain
