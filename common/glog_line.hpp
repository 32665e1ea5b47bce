// Log lines in glog's format, as Caffe's programs print them:
//
//   I1206 21:00:00.123456  1234 solver.cpp:218] Iteration 100, loss = 0.2
//
// a severity letter (I, W, E, F), the local month, day and time with
// microseconds, the thread id right-aligned in 5 columns, the source file and
// line, "] " and the message. Caffe's tools/extra/parse_log.py and other
// readers of Caffe logs read the time and the message from these lines.
#pragma once

#include <cstdio>
#include <string>

namespace pstrain {

// "<level><MMDD HH:MM:SS.ffffff> <pid, 5 wide> <where>] " for the time now;
// `where` is "file.cpp:123". REQUIRES: level is one of I W E F.
std::string GlogPrefix(char level, const std::string& where);
// GlogPrefix(level, where) + message.
std::string GlogLine(char level, const std::string& where, const std::string& message);
// Writes GlogLine(...) and a newline to `out` and flushes it.
void WriteGlogLine(std::FILE* out, char level, const std::string& where,
                   const std::string& message);

}  // namespace pstrain

// "file.cpp:123" of the place it is written, as glog names it.
#define PSTRAIN_GLOG_WHERE                                                    \
  (std::string(__FILE__).substr(std::string(__FILE__).rfind('/') + 1) + ":" + \
   std::to_string(__LINE__))
