// SPDX-License-Identifier: Apache-2.0
#pragma once
/// \file
/// What `verify` prints, once for both tools (archguard verify, archguard-verify): the text for
/// a terminal or a log, and the line format the CMake verify step reads (`--lines`). Every
/// value built from input is escaped (control characters as \xNN), so no file or kernel name
/// can forge a line. Returns text; never prints.

#include <archguard/coverage.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace archguard {

/// Control characters (and DEL) as \xNN.
std::string escape_control(std::string_view text);

/// The text of a verify run: one line per lacking unit, "note: " lines for compatible SASS,
/// architecture-specific extras and units without kernels (not with `quiet`), the lines of
/// `no_device_code` (inputs without device code; not with `quiet`), and the closing
/// "verify: ok|FAILED: ..." line (with `quiet` only when it failed). `failed`: the exit status
/// is not 0.
std::string verify_text(const VerifyReport& report, bool quiet, bool failed,
                        const std::vector<std::string>& no_device_code = {});

/// The line format for tools (the CMake verify step): "key=value" lines,
///   format=1
///   status=ok | missing | error
///   missing=<what a unit lacks: the file, its translation unit or fatbin, the codes, kernels>
///   fix=<the advice that goes with the missing= line before it>
///   error=<an input that could not be read>
///   counts=<fatbins> <objects> <lacking>
/// in the order of the report. Values are escaped as escape_control() does.
std::string verify_lines(const VerifyReport& report, const std::vector<std::string>& errors);

}  // namespace archguard
