// SPDX-License-Identifier: Apache-2.0
// The verify output of both tools (see <archguard/verify_output.hpp>).
#include <archguard/verify_output.hpp>

#include <string>

namespace archguard {
namespace {

// A lacking unit's message is "<what it lacks>; <fix>" (coverage.cpp writes the fix last, and
// no fix holds "; "): the two halves, for the line format.
std::pair<std::string, std::string> split_fix(const std::string& message) {
  const std::size_t at = message.rfind("; ");
  if (at == std::string::npos) return {message, ""};
  return {message.substr(0, at), message.substr(at + 2)};
}

}  // namespace

std::string escape_control(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[u >> 4];
      out += digits[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

std::string verify_text(const VerifyReport& report, bool quiet, bool failed, const std::vector<std::string>& no_device_code) {
  std::string out;
  std::size_t lacking = 0, extras = 0, compatible = 0, kernel_less = 0;
  for (const auto& u : report.units) {
    switch (u.status) {
      case UnitStatus::missing:
        ++lacking;
        out += escape_control(u.message) + "\n";
        break;
      case UnitStatus::specific_extra:
        ++extras;
        break;
      case UnitStatus::no_kernels:
        ++kernel_less;
        break;
      case UnitStatus::compatible:
        ++compatible;
        break;
      case UnitStatus::ok:
        break;
    }
    if (!quiet && u.status != UnitStatus::missing && u.status != UnitStatus::ok) out += "note: " + escape_control(u.message) + "\n";
  }
  if (!quiet)
    for (const std::string& line : no_device_code) out += escape_control(line) + "\n";
  if (report.units.empty() && !failed) return out;  // no device code: the caller says so
  if (!quiet || failed) {
    out += std::string("verify: ") + (failed ? "FAILED" : "ok") + ": " + std::to_string(report.units.size()) + (report.units.size() == 1 ? " fatbin in " : " fatbins in ") +
           std::to_string(report.objects) + (report.objects == 1 ? " object, " : " objects, ") + std::to_string(lacking) + " lacking, " + std::to_string(extras) +
           " architecture-specific extras, " + std::to_string(compatible) + " using compatible SASS" +
           (kernel_less == 0 ? "" : ", " + std::to_string(kernel_less) + " without kernels") + "\n";
  }
  return out;
}

std::string verify_lines(const VerifyReport& report, const std::vector<std::string>& errors) {
  std::string body;
  std::size_t lacking = 0;
  for (const auto& u : report.units) {
    if (u.status != UnitStatus::missing) continue;
    ++lacking;
    const auto [what, fix] = split_fix(u.message);
    body += "missing=" + escape_control(what) + "\n";
    if (!fix.empty()) body += "fix=" + escape_control(fix) + "\n";
  }
  for (const std::string& e : errors) body += "error=" + escape_control(e) + "\n";
  const char* status = !errors.empty() ? "error" : lacking != 0 ? "missing"
                                                                : "ok";
  return std::string("format=1\nstatus=") + status + "\n" + body + "counts=" + std::to_string(report.units.size()) + " " +
         std::to_string(report.objects) + " " + std::to_string(lacking) + "\n";
}

}  // namespace archguard
