// SPDX-License-Identifier: Apache-2.0
// Test fixture: host main for the -rdc executable.
extern "C" __global__ void fixture_fill(int* p, int v);
int main() { return 0; }
