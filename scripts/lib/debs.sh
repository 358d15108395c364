# Sourced by the setup scripts: installs the Debian packages that are not installed yet.
#   ensure_debs <who> <package>...
# <who> prefixes the one line it prints. Packages already installed are skipped, so a second run
# changes nothing; apt-get runs through sudo unless the caller is root.
ensure_debs() {
  local who="$1"; shift
  local missing=() p sudo=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "$who: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
