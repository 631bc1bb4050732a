#!/usr/bin/env bash
# Lint (ruff, settings in ruff.toml), types (mypy, settings in setup.cfg [mypy]),
# then the whole test suite (pytest), with its own set-up: Debian's redis-server
# (the Redis tests start a real one on loopback), chromium + chromium-driver (the
# HTML report is checked in a real headless browser), a virtualenv with the test
# extras. Extra arguments go to pytest, e.g. scripts/test.sh -k bloom; ruff and
# mypy run first even then (they take seconds), and any finding fails the command.
source "$(dirname "$0")/_env.sh"
need_packages <<'EOF'
command -v redis-server|redis-server|a real Redis server on loopback, started by the Redis tests
command -v chromium|chromium|the headless browser the HTML audit report is checked in
command -v chromedriver|chromium-driver|the driver selenium uses to run that browser
command -v wget|wget|writes WARC archives of the local example sites for the WARC input tests
test -f /usr/share/doc/git-doc/git-add.html|git-doc|real documentation pages the generated DUST sites serve (tests/dustgen.py)
test -f /usr/share/doc/maint-guide/html/index.en.html|maint-guide|more real documentation pages for the generated DUST sites
test -f /usr/share/doc/maint-guide-de/html/index.de.html|maint-guide-de|German pages of the same guide, for the generated DUST sites
EOF
setup_venv "test"
cd "$ROOT"
set +e
if ! python -m ruff check .; then
  echo "ERROR: scripts/test.sh: the lint step (ruff check) failed; pytest did not run." >&2
  exit 1
fi
if ! python -m mypy; then
  echo "ERROR: scripts/test.sh: the type check (mypy) failed; pytest did not run." >&2
  exit 1
fi
python -m pytest "$@"
rc=$?
if [ "$rc" != 0 ]; then
  echo "ERROR: scripts/test.sh: the test step (pytest) failed (exit status $rc)." >&2
fi
# pytest's 5 means "no tests collected": that is a failure of this command.
exit $rc
