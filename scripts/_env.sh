# Shared set-up for scripts/test.sh and scripts/demo.sh: system packages, a
# project virtualenv in .venv, the package installed in it. Sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DEDUP_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
_apt_updated=0

_as_root() {
  if [ "$(id -u)" = 0 ]; then "$@";
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo "$@";
  else return 1; fi
}

# need_packages reads lines "CHECK|DEBIAN_PACKAGE|what it is for" on its standard
# input. Every package whose check fails is announced first, one line each saying
# what it is for, then all are installed in one apt-get call without recommended
# packages (the least footprint); when that cannot be done the command stops with
# a message naming the packages.
need_packages() {
  local check pkg why missing=() checks=()
  while IFS='|' read -r check pkg why; do
    [ -n "$pkg" ] || continue
    if ! eval "$check" >/dev/null 2>&1; then
      missing+=("$pkg"); checks+=("$check")
      echo ">> will install the Debian package $pkg: $why" >&2
    fi
  done
  [ "${#missing[@]}" = 0 ] && return 0
  if command -v apt-get >/dev/null 2>&1; then
    echo ">> apt-get install --no-install-recommends ${missing[*]}" >&2
    if [ "$_apt_updated" = 0 ]; then
      _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
      _apt_updated=1
    fi
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || true
  fi
  local i failed=()
  for i in "${!missing[@]}"; do
    eval "${checks[$i]}" >/dev/null 2>&1 || failed+=("${missing[$i]}")
  done
  [ "${#failed[@]}" = 0 ] && return 0
  echo "ERROR: the system package(s) ${failed[*]} are required and could not be installed." >&2
  echo "       Install them (e.g. 'sudo apt-get install --no-install-recommends ${failed[*]}') and run this command again." >&2
  exit 1
}

# setup_venv EXTRAS: the package (with the named extras, none when empty) installed
# in the project virtualenv, which is put first on PATH.
setup_venv() {
  local extras="$1"
  need_packages <<< "command -v $PY|python3|the Python that runs the package"
  if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
      rm -rf "$VENV"
      need_packages <<< "false|python3-venv|Python's venv module, for the project's virtualenv in .venv"
    fi
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  fi
  # Reinstall only when the package metadata changed since the last install.
  local stamp="$VENV/.dedup-installed-${extras:-package}"
  local want target="$ROOT"
  [ -z "$extras" ] || target="$ROOT[$extras]"
  want="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" | sha1sum | cut -c1-40)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo ">> installing scrapy-dedup${extras:+[$extras]} into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$target" >&2
    echo "$want" > "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}
