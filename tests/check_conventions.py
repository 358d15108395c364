#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Holds every registered test to the suite's conventions (docs/testing.md).

Reads `ctest --show-only=json-v1` of a build tree and fails, naming each offender, when a test
  - lacks SKIP_RETURN_CODE 77: it could not report "Skipped", so it would pass or fail instead;
  - uses SKIP_REGULAR_EXPRESSION: a second skip convention;
  - uses PASS_REGULAR_EXPRESSION: CTest then ignores the exit status, so the test passes when
    the line is printed by a command that failed (use expect_run.cmake);
  - uses WILL_FAIL: any failure, including a crash or a missing tool, would pass.

Usage: check_conventions.py <ctest> <build dir>
"""
import json
import subprocess
import sys


def main() -> int:
    ctest, build = sys.argv[1], sys.argv[2]
    out = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
    tests = json.loads(out)["tests"]
    problems = []
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        name = t["name"]
        if str(props.get("SKIP_RETURN_CODE")) != "77":
            problems.append(f"{name}: no SKIP_RETURN_CODE 77 (got {props.get('SKIP_RETURN_CODE')})")
        for bad, why in (("SKIP_REGULAR_EXPRESSION", "skips by regex; exit 77 instead"),
                         ("PASS_REGULAR_EXPRESSION", "ignores the exit status; use expect_run.cmake"),
                         ("WILL_FAIL", "passes on any failure; check the failure with expect_run.cmake")):
            if props.get(bad):
                problems.append(f"{name}: {bad} {why}")
    for p in problems:
        print(p)
    print(f"check_conventions: {len(tests)} tests, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
