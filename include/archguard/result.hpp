// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// Result<T>: a value or an error message. The library never throws across its API and never
/// prints; every fallible function returns one of these.

#include <string>
#include <utility>
#include <variant>

namespace archguard {

/// An error: a lower-case message without a final period that names file, offset and values.
struct Error {
  std::string message;
  int code = 0;  ///< the underlying API's status (CUresult, nvrtcResult, errno) when one applies, else 0
};

/// A value of type T or an Error. Access value() only after checking ok().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(implicit)
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
  /// Precondition: !ok(). The numeric status of the failing API call, 0 when none applies.
  int code() const { return std::get<1>(v_).code; }

 private:
  std::variant<T, Error> v_;
};

/// Result of an operation that yields nothing on success.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(std::string message) { return Error{std::move(message)}; }
inline Error make_error(std::string message, int code) { return Error{std::move(message), code}; }

}  // namespace archguard
