// Status and Result<T>: recoverable failures as values.
//
// A Status is either ok or carries a code and one human-readable message that
// names the place of the failure (file and line, layer, key or peer). The code
// says what kind of failure it is, so that callers decide by kind (IsNotFound,
// IsRetryable) and never by parsing messages; common/exit_code.hpp maps it to
// a process's exit status. Result<T> holds a value or a non-ok Status. Neither
// ever aborts; PSTRAIN_CHECK is reserved for broken invariants of our own code.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace pstrain {

// What went wrong, in LevelDB's manner. Permanent unless noted: running the
// same thing again fails the same way.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input: a prototxt, a layer type, a flag, a value
  kNotFound,            // a file, LMDB or key that does not exist
  kCorruption,          // a file or record that exists but does not parse
  kIOError,             // the operating system refused a read or write
  kFailedPrecondition,  // the system is not in a state to do it (no CUDA device)
  kDiverged,            // training produced a loss that is not finite
  kResourceExhausted,   // out of host, device or pinned memory (the request does not fit)
  kUnavailable,         // retryable: a peer is gone or cannot be reached
  kDeadlineExceeded,    // retryable: a peer did not answer in time
  kUnknown,             // anything else (Status::Error)
};

// "InvalidArgument", "NotFound", ...; "OK" for kOk.
inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kIOError:
      return "IOError";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kDiverged:
      return "Diverged";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  // A failure of no particular kind (code kUnknown: permanent).
  static Status Error(std::string message) {
    return Status(StatusCode::kUnknown, std::move(message));
  }
  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status NotFound(std::string message) {
    return Status(StatusCode::kNotFound, std::move(message));
  }
  static Status Corruption(std::string message) {
    return Status(StatusCode::kCorruption, std::move(message));
  }
  static Status IOError(std::string message) {
    return Status(StatusCode::kIOError, std::move(message));
  }
  static Status FailedPrecondition(std::string message) {
    return Status(StatusCode::kFailedPrecondition, std::move(message));
  }
  static Status Diverged(std::string message) {
    return Status(StatusCode::kDiverged, std::move(message));
  }
  static Status ResourceExhausted(std::string message) {
    return Status(StatusCode::kResourceExhausted, std::move(message));
  }
  static Status Unavailable(std::string message) {
    return Status(StatusCode::kUnavailable, std::move(message));
  }
  static Status DeadlineExceeded(std::string message) {
    return Status(StatusCode::kDeadlineExceeded, std::move(message));
  }
  static Status Unknown(std::string message) {
    return Status(StatusCode::kUnknown, std::move(message));
  }
  // REQUIRES: code != kOk.
  static Status FromCode(StatusCode code, std::string message) {
    return Status(code == StatusCode::kOk ? StatusCode::kUnknown : code, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool IsInvalidArgument() const { return code_ == StatusCode::kInvalidArgument; }
  bool IsNotFound() const { return code_ == StatusCode::kNotFound; }
  bool IsCorruption() const { return code_ == StatusCode::kCorruption; }
  bool IsIOError() const { return code_ == StatusCode::kIOError; }
  bool IsFailedPrecondition() const { return code_ == StatusCode::kFailedPrecondition; }
  bool IsDiverged() const { return code_ == StatusCode::kDiverged; }
  bool IsResourceExhausted() const { return code_ == StatusCode::kResourceExhausted; }
  bool IsUnavailable() const { return code_ == StatusCode::kUnavailable; }
  bool IsDeadlineExceeded() const { return code_ == StatusCode::kDeadlineExceeded; }
  // True for the failures that may pass when tried again (a peer gone or
  // late); every other failure recurs.
  bool IsRetryable() const { return IsUnavailable() || IsDeadlineExceeded(); }
  // "OK", or "<code name>: <message>" (for logs and tests; programs print message()).
  std::string ToString() const {
    return ok() ? "OK" : std::string(StatusCodeName(code_)) + ": " + message_;
  }

  // Returns this status with `context + ": "` put in front of the message and
  // the same code; an ok status stays ok.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(state_).ok()) state_ = Status::Error("Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  // REQUIRES: !ok() for status() to carry a message; returns Ok when ok().
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(state_); }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> state_;
};

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* what,
                                     const std::string& detail) {
  std::fprintf(stderr, "pstrain: internal error at %s:%d: check failed: %s %s\n", file, line, what,
               detail.c_str());
  std::abort();
}

}  // namespace pstrain

#define PSTRAIN_CONCAT_INNER(a, b) a##b
#define PSTRAIN_CONCAT(a, b) PSTRAIN_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not ok.
#define PSTRAIN_RETURN_IF_ERROR(expr)                    \
  do {                                                   \
    ::pstrain::Status pstrain_status_ = (expr);          \
    if (!pstrain_status_.ok()) return pstrain_status_;   \
  } while (0)

// `PSTRAIN_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an ok Result or
// returns its status.
#define PSTRAIN_ASSIGN_OR_RETURN(lhs, expr) \
  PSTRAIN_ASSIGN_OR_RETURN_IMPL(PSTRAIN_CONCAT(pstrain_result_, __LINE__), lhs, expr)
#define PSTRAIN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// For broken invariants of our own code only (never for user input).
#define PSTRAIN_CHECK(cond)                                                  \
  do {                                                                       \
    if (!(cond)) ::pstrain::CheckFailed(__FILE__, __LINE__, #cond, "");      \
  } while (0)
#define PSTRAIN_CHECK_MSG(cond, msg)                                         \
  do {                                                                       \
    if (!(cond)) ::pstrain::CheckFailed(__FILE__, __LINE__, #cond, (msg));   \
  } while (0)
