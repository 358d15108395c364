#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `children` case: a script that runs the plugin host twice as child processes (bash -c),
# each of them failing the same way. `archguard run` on the script must follow both children.
# Usage: children.sh PLUGIN_HOST LIBRARY. Exit status: that of the last child.
set -u
host=$1 lib=$2
bash -c '"$0" "$1"; exit $?' "$host" "$lib"
bash -c '"$0" "$1"; exit $?' "$host" "$lib"
