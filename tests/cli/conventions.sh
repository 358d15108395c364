#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CLI conventions and first-use answers (issue 24): --version/-V (version, commit, the table's
# newest release, read here from architectures.txt), `help [verb]`, did-you-mean for misspelt
# verbs, sub-verbs, options and values, the generated man page and completions (every verb and
# option of this build in them), and the answers a new user gets for --cc "", an unknown CC,
# a missing doctor FILE, a PIE, a file without device code.
# Usage: conventions.sh ARCHGUARD SHARE_DIR REPO
set -u
ag=$1 share=$2 repo=$3
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# expect CODE REGEX CMD...: exit status CODE and stdout+stderr matching REGEX (grep -E)
expect() {
  local code=$1 re=$2; shift 2
  "$@" >"$tmp/out" 2>&1
  local got=$?
  [[ $got == "$code" ]] || { fail "$* exits $got, expected $code"; sed 's/^/    /' "$tmp/out" | head -5; return; }
  grep -Eq -- "$re" "$tmp/out" || { fail "$*: no line matches '$re'"; sed 's/^/    /' "$tmp/out" | head -5; }
}

# --- version ---------------------------------------------------------------------------------
newest=$(grep '^release|' "$repo/cmake/Modules/CudaArchGuard/architectures.txt" | tail -n1 | cut -d'|' -f2)
version=$(sed -n 's/^project(CudaArchGuard VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
expect 0 "^archguard $version\$" "$ag" --version
expect 0 '^commit [0-9a-f]{7,}(-dirty)?$|^commit unknown$' "$ag" --version
expect 0 "^architecture table: newest release CUDA $newest " "$ag" --version
[[ "$("$ag" -V 2>&1)" == "$("$ag" --version 2>&1)" ]] || fail "-V and --version differ"

# --- help ------------------------------------------------------------------------------------
[[ "$("$ag" help 2>&1)" == "$("$ag" --help 2>&1)" ]] || fail "archguard help differs from --help"
expect 0 '^Usage: archguard cache stat' "$ag" help cache stat
"$ag" help inspect | tail -n +3 >"$tmp/a"; "$ag" inspect --help | tail -n +3 >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || fail "help inspect and inspect --help list different options"
expect 2 "no command 'cahe' in 'archguard'; did you mean 'cache'\?" "$ag" help cahe

# --- did-you-mean ----------------------------------------------------------------------------
expect 2 "unknown option '--versoin' for 'archguard'; did you mean '--version'\?" "$ag" --versoin
expect 2 "unknown command 'sta' for 'archguard cache'; did you mean 'archguard cache stat'\?" "$ag" cache sta
expect 2 "unknown command 'inpsect'; did you mean 'inspect'\?" "$ag" inpsect
expect 2 "unknown option '--jsn' for 'archguard inspect'; did you mean '--json'\?" "$ag" inspect --jsn /dev/null
expect 2 "did you mean 'highest'\?" "$ag" verify --require 90 --ptx hihgest /bin/true

# --- first-use answers -----------------------------------------------------------------------
cc=${CXX:-c++}
printf 'int main() { return 0; }\n' >"$tmp/main.cpp"
if command -v "$cc" >/dev/null && "$cc" -pie -fPIE -o "$tmp/pie" "$tmp/main.cpp" 2>/dev/null; then
  expect 0 "pie  \(executable, x86-64\)|pie  \(executable, aarch64\)" "$ag" inspect "$tmp/pie"
  expect 0 'no device code' "$ag" inspect "$tmp/pie"
  [[ $("$ag" inspect --json "$tmp/pie" | grep -c '"pie": true') == 1 ]] || fail "inspect --json: no \"pie\": true"
  expect 2 'an empty compute capability' "$ag" check --cc "" "$tmp/pie"
  expect 0 'sm_99 is not in the architecture table' "$ag" check --cc 9.9 "$tmp/pie"
  expect 0 'sm_130 is not in the architecture table' "$ag" check --cc 13.0 "$tmp/pie"
  expect 0 'no device code' "$ag" doctor --no-smoke --cc 9.0 "$tmp/pie"
else
  echo "note: no C++ compiler: the PIE checks are left out"
fi
mkdir -p "$tmp/nocode" && echo text >"$tmp/nocode/a.txt"
expect 0 "^$tmp/nocode: no device code \(1 file scanned\)" "$ag" inspect "$tmp/nocode"
expect 2 "^archguard doctor: $tmp/nonexistent: cannot open" "$ag" doctor "$tmp/nonexistent"
[[ $(grep -c "$tmp/nonexistent" "$tmp/out") == 1 ]] || fail "doctor names the missing FILE more than once"

# --- man page and completions, generated from this build's definitions ----------------------
man=$share/man/man1/archguard.1
bash_c=$share/bash-completion/completions/archguard
zsh_c=$share/zsh/site-functions/_archguard
for f in "$man" "$bash_c" "$zsh_c"; do [[ -s $f ]] || fail "$f is missing or empty"; done
verbs=$("$ag" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }')
[[ -n $verbs ]] || fail "no verbs in archguard --help"
for v in $verbs; do
  grep -q "^\.SS \"archguard $v" "$man" || fail "the man page has no section for '$v'"
  grep -q "'|$v') cag_path='$v'" "$bash_c" || fail "the bash completion does not know '$v'"
done
for o in $("$ag" check --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
  grep -qF -- "${o//-/\\-}" "$man" || fail "the man page lacks check's option $o"
done
if command -v man >/dev/null; then
  MANWIDTH=80 man --warnings -l "$man" >"$tmp/man.txt" 2>"$tmp/man.err" || fail "man -l $man"
  [[ ! -s $tmp/man.err ]] || { fail "man reports warnings"; head -5 "$tmp/man.err"; }
  grep -q 'archguard - find, predict and fix' "$tmp/man.txt" || fail "the rendered man page has no NAME line"
fi
complete_words() {  # the completion's answer for the words given
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _archguard; printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_c" "$@"
}
[[ $(complete_words archguard ca) == cache ]] || fail "bash: 'archguard ca' does not complete to cache"
complete_words archguard cache s | grep -qx stat || fail "bash: 'archguard cache s' does not offer stat"
complete_words archguard inspect --js | grep -qx -- --json || fail "bash: 'archguard inspect --js' does not offer --json"
if command -v zsh >/dev/null; then
  zsh -n "$zsh_c" || fail "zsh -n $zsh_c"
  # the function body run with zsh's _describe and _files stubbed: what it would offer
  zsh_offers() {  # zsh_offers WORD...: the candidates for the last word
    zsh -c '_describe() { print -l -- "${(@P)4}"; }; _files() { print FILES; }; f=$1; shift; words=("$@"); CURRENT=$#
            source "$f"' _ "$zsh_c" "$@"
  }
  zsh_offers archguard cache s | grep -q '^stat:Size' || fail "zsh: 'archguard cache s' does not offer stat"
  zsh_offers archguard inspect --js | grep -q '^--json:' || fail "zsh: 'archguard inspect --js' does not offer --json"
  [[ $(zsh_offers archguard check --cc '') == FILES ]] || fail "zsh: the value of --cc is not completed as a file"
else
  echo "note: no zsh: its completion is checked only for its #compdef line"
fi
grep -q '^#compdef archguard' "$zsh_c" || fail "the zsh completion has no #compdef line"

echo "$fails failure(s)"
[[ $fails -eq 0 ]]
