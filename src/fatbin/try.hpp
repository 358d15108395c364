// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal: early return on error for Result<T> expressions.

#define AG_CAT_INNER(a, b) a##b
#define AG_CAT(a, b) AG_CAT_INNER(a, b)
/// AG_TRY(auto x, expr): evaluates expr (a Result), returns its error, else binds the value.
#define AG_TRY(decl, expr)                                     \
  auto AG_CAT(ag_try_, __LINE__) = (expr);                     \
  if (!AG_CAT(ag_try_, __LINE__)) return AG_CAT(ag_try_, __LINE__).error(); \
  decl = std::move(*AG_CAT(ag_try_, __LINE__))
