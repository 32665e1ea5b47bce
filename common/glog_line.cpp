#include "common/glog_line.hpp"

#include <sys/time.h>
#include <unistd.h>

#include <ctime>

namespace pstrain {

std::string GlogPrefix(char level, const std::string& where) {
  timeval now{};
  ::gettimeofday(&now, nullptr);
  std::tm local{};
  const std::time_t seconds = now.tv_sec;
  ::localtime_r(&seconds, &local);
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%c%02d%02d %02d:%02d:%02d.%06ld %5d ", level,
                local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec,
                static_cast<long>(now.tv_usec), static_cast<int>(::getpid()));
  return buffer + where + "] ";
}

std::string GlogLine(char level, const std::string& where, const std::string& message) {
  return GlogPrefix(level, where) + message;
}

void WriteGlogLine(std::FILE* out, char level, const std::string& where,
                   const std::string& message) {
  std::fprintf(out, "%s\n", GlogLine(level, where, message).c_str());
  std::fflush(out);
}

}  // namespace pstrain
