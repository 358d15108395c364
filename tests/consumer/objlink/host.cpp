// SPDX-License-Identifier: Apache-2.0
int deliverable_version() { return 1; }
