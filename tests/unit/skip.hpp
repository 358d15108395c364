// SPDX-License-Identifier: Apache-2.0
// The Catch2 side of the test suite's one skip convention (docs/testing.md): exit code 77,
// which every test registers with CTest as SKIP_RETURN_CODE.
//
// A test case whose subject is absent on this machine (nvcc, the fixtures nvcc builds, a file
// of the system, root) calls ARCHGUARD_SKIP("why") instead of passing without checking
// anything. The macro records the reason, prints "SKIPPED: why" and returns from the test case;
// the test executable (tests/unit/catch_main.cpp) then exits 77 when nothing failed and a case
// was skipped. catch_discover_tests runs each test case as its own CTest entry, so CTest shows
// that one case as "Skipped" and the others as passed. Run by hand over many cases, the
// executable exits 77 too and lists the skipped cases: the run did not check everything.
// Catch2 2.13 has no SKIP of its own (Catch2 3.3 added one); this is its stand-in.
#pragma once

#include <sstream>
#include <string>

namespace archguard::test {
/// Records a skipped test case (defined in catch_main.cpp).
void note_skip(const std::string& test_case, const std::string& reason);
/// For a helper deep inside a test case that cannot return to it: prints "SKIPPED: reason" and
/// exits 77 at once. CTest runs each case alone, so only that case is reported skipped; run by
/// hand, the executable stops there. Prefer ARCHGUARD_SKIP.
[[noreturn]] void skip_now(const std::string& reason);
}  // namespace archguard::test

/// Skips the current test case: `reason` is streamed (ARCHGUARD_SKIP("no nvcc in " << dir)).
/// Use it at the top level of a TEST_CASE body (it returns from the function).
#define ARCHGUARD_SKIP(reason)                                                   \
  do {                                                                           \
    std::ostringstream archguard_skip_reason_;                                   \
    archguard_skip_reason_ << reason;                                            \
    ::archguard::test::note_skip(Catch::getResultCapture().getCurrentTestName(), \
                                 archguard_skip_reason_.str());                  \
    return;                                                                      \
  } while (false)
