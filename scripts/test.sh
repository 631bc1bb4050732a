#!/usr/bin/env bash
# Lint (ruff, settings in ruff.toml), types (mypy, settings in setup.cfg [mypy]),
# the docs build (sphinx-build -W, docs/conf.py), then the whole test suite (pytest),
# with its own set-up: the Debian packages below, announced before they are installed,
# and a virtualenv with the test extras. Extra arguments go to pytest, e.g.
# scripts/test.sh -k bloom; the three checks run first even then (they take seconds),
# and any finding fails the command.
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
# the docs site (docs/, Sphinx with myst-parser), warnings as errors: a broken link or anchor fails
if ! python -m sphinx -W --keep-going -q -b html docs docs/_build/html; then
  echo "ERROR: scripts/test.sh: the docs build (sphinx-build -W) failed; pytest did not run." >&2
  exit 1
fi
python -m pytest "$@"
rc=$?
if [ "$rc" != 0 ]; then
  echo "ERROR: scripts/test.sh: the test step (pytest) failed (exit status $rc)." >&2
fi
# pytest's 5 means "no tests collected": that is a failure of this command.
exit $rc
