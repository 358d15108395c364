// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Result<T>: a value or an error. The library never throws across its API and never prints;
/// every fallible function returns one of these. An Error says what went wrong in words (the
/// message), which kind of failure it is (ErrorKind, for callers that branch) and, beside the
/// kind, the number the failing API gave (errno, CUresult, nvrtcResult) when there was one.

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace archguard {

/// What kind of failure an Error reports. Callers branch on this, never on the message; the
/// native number, when one applies, is Error::code.
enum class ErrorKind : unsigned char {
  io,           ///< a system call on a file or pipe failed; code: errno
  not_found,    ///< a file, program or entry that is not there; code: errno (ENOENT) when one applies
  corrupt,      ///< bytes that are not what they claim (truncated, out of bounds, bad magic or checksum)
  limit,        ///< input past a configured size limit (the bytes may be fine; the limit can be raised)
  unsupported,  ///< well-formed input this build, toolkit or device cannot handle
  usage,        ///< the caller asked for something malformed (a token, an option value, a list file)
  process,      ///< an external program (nvcc) failed or printed what it should not; code: errno or 0
  driver,       ///< the CUDA driver failed or is absent; code: CUresult (device::kNoDriverCode when absent)
  nvrtc,        ///< NVRTC failed; code: nvrtcResult
};

/// The kind's name as written here ("not_found"), for logs and tests.
constexpr std::string_view to_string(ErrorKind kind) {
  // One name per enumerator, in their order.
  constexpr std::string_view names[] = {"io", "not_found", "corrupt", "limit", "unsupported", "usage", "process", "driver", "nvrtc"};
  const auto i = static_cast<std::size_t>(kind);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}
static_assert(to_string(ErrorKind::nvrtc) == "nvrtc", "to_string(ErrorKind): a name for every enumerator, in order");

/// An error: a lower-case message without a final period that names file, offset and values,
/// its kind, and the native status of the failing call.
struct Error {
  Error(ErrorKind k, std::string m, int c = 0) : message(std::move(m)), kind(k), code(c) {}
  std::string message;
  ErrorKind kind;
  int code = 0;  ///< the native status beside the kind (errno, CUresult, nvrtcResult), else 0
};

/// A value of type T or an Error. Access value() only after checking ok().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT(implicit)
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(implicit)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// Precondition: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// Precondition: !ok().
  const Error& error() const { return std::get<1>(v_); }
  const std::string& message() const { return std::get<1>(v_).message; }
  /// Precondition: !ok(). What kind of failure this is.
  ErrorKind kind() const { return std::get<1>(v_).kind; }
  /// Precondition: !ok(). The native status of the failing call (see ErrorKind), 0 when none applies.
  int code() const { return std::get<1>(v_).code; }

 private:
  std::variant<T, Error> v_;
};

/// Result of an operation that yields nothing on success.
struct Ok {};
using Status = Result<Ok>;

/// An Error of the given kind; code is the native status beside it (errno, CUresult, nvrtcResult).
inline Error make_error(ErrorKind kind, std::string message, int code = 0) {
  return Error{kind, std::move(message), code};
}

/// A failed system call: not_found when errno is ENOENT, else io; errno kept as the code.
inline Error errno_error(std::string message, int err) {
  return Error{err == ENOENT ? ErrorKind::not_found : ErrorKind::io, std::move(message), err};
}

/// The same failure told with more context: the kind and code of `cause`, a new message.
inline Error rewrap(const Error& cause, std::string message) {
  return Error{cause.kind, std::move(message), cause.code};
}

}  // namespace archguard

#define AG_TRY_CAT_INNER(a, b) a##b
#define AG_TRY_CAT(a, b) AG_TRY_CAT_INNER(a, b)
/// AG_TRY(auto x, expr): evaluates expr (a Result); on error returns the Error from the enclosing
/// function (which returns a Result), else binds the value to the declaration, moved.
#define AG_TRY(decl, expr)                                                          \
  auto AG_TRY_CAT(ag_try_, __LINE__) = (expr);                                      \
  if (!AG_TRY_CAT(ag_try_, __LINE__)) return AG_TRY_CAT(ag_try_, __LINE__).error(); \
  decl = std::move(*AG_TRY_CAT(ag_try_, __LINE__))
/// AG_TRY_STATUS(expr): evaluates expr (a Result, usually a Status); on error returns the Error.
#define AG_TRY_STATUS(expr)                                                           \
  do {                                                                                \
    if (auto ag_try_status_ = (expr); !ag_try_status_) return ag_try_status_.error(); \
  } while (false)
