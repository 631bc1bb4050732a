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

# need_package COMMAND_OR_CHECK DEBIAN_PACKAGE: install the package with apt when
# the check fails, or stop with a message naming the package.
need_package() {
  local check="$1" pkg="$2"
  if eval "$check" >/dev/null 2>&1; then return 0; fi
  echo ">> $pkg is missing; installing it with apt-get" >&2
  if command -v apt-get >/dev/null 2>&1; then
    if [ "$_apt_updated" = 0 ]; then
      _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
      _apt_updated=1
    fi
    if _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >&2; then
      eval "$check" >/dev/null 2>&1 && return 0
    fi
  fi
  echo "ERROR: the system package '$pkg' is required and could not be installed." >&2
  echo "       Install it (e.g. 'sudo apt-get install $pkg') and run this command again." >&2
  exit 1
}

setup_venv() {
  local extras="$1"
  need_package "command -v $PY" python3
  if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
      rm -rf "$VENV"
      need_package "false" python3-venv
    fi
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  fi
  # Reinstall only when the package metadata changed since the last install.
  local stamp="$VENV/.dedup-installed-$extras"
  local want
  want="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" | sha1sum | cut -c1-40)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo ">> installing scrapy-dedup[$extras] into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[$extras]" >&2
    echo "$want" > "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}
