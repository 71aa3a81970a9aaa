# Debian package helpers shared by the install scripts (install-datasets.sh,
# install-bench.sh, openblas.sh). Source it; it defines functions only.

# apt_installed PKG: whether dpkg knows PKG as installed.
apt_installed() {
  command -v dpkg-query >/dev/null 2>&1 &&
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# apt_missing PKG...: prints those of the packages not installed, space
# separated (nothing when all are).
apt_missing() {
  local p out=""
  for p in "$@"; do
    apt_installed "$p" || out="$out $p"
  done
  echo "${out# }"
}

# apt_install WHO PKG...: installs the packages with apt-get, as root or
# through sudo (`sudo env DEBIAN_FRONTEND=... apt-get`: a sudo rule that
# allows apt-get alone refuses it; run the script as root then). The
# package lists are refreshed first when one of the packages is unknown to
# apt (a fresh machine has none), and once more before a second try when
# the install fails (stale lists point at removed versions); a failed
# refresh is reported and the install tried anyway. WHO names the calling
# script in messages. Without apt-get, or without root and sudo, it says so
# on stderr and returns 1; a failed install returns apt-get's status.
apt_install() {
  local who=$1 p sudo=""
  shift
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$who: apt-get not found; install $* (Debian names) and run again" >&2
    return 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "$who: need root or sudo to install $*" >&2
      return 1
    fi
  fi
  for p in "$@"; do
    if ! apt-cache show "$p" >/dev/null 2>&1; then
      _apt_refresh "$who" $sudo
      break
    fi
  done
  echo "$who: installing $*" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null || {
    _apt_refresh "$who" $sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  }
}

# _apt_refresh WHO [sudo]: apt-get update, reporting a failure without
# failing (apt_install tries the install anyway).
_apt_refresh() {
  local who=$1
  shift
  "$@" apt-get update -qq >&2 || echo "$who: apt-get update failed; trying the install anyway" >&2
}
