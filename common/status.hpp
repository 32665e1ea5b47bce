// Status and Result<T>: recoverable failures as values.
//
// A Status is either ok or carries one human-readable message that names the
// place of the failure (file and line, layer, key or peer). Result<T> holds a
// value or a non-ok Status. Neither ever aborts; PSTRAIN_CHECK is reserved for
// broken invariants of our own code.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace pstrain {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Returns this status with `context + ": "` put in front of the message;
  // an ok status stays ok.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(context + ": " + message_);
  }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
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
