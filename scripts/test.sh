#!/usr/bin/env bash
# Lint (ruff, settings in ruff.toml), types (mypy, settings in setup.cfg [mypy]),
# then the whole test suite (pytest), with its own set-up: Debian's redis-server
# (the Redis tests start a real one on loopback), chromium + chromium-driver (the
# HTML report is checked in a real headless browser), a virtualenv with the test
# extras. Extra arguments go to pytest, e.g. scripts/test.sh -k bloom; ruff and
# mypy run first even then (they take seconds), and any finding fails the command.
source "$(dirname "$0")/_env.sh"
need_package "command -v redis-server" redis-server
# the HTML audit report is checked in a real headless browser
need_package "command -v chromium" chromium
need_package "command -v chromedriver" chromium-driver
# WARC input is checked on archives GNU wget writes of the local example sites
need_package "command -v wget" wget
# the generated DUST sites (tests/dustgen.py) serve real documentation pages from these
need_package "test -f /usr/share/doc/git-doc/git-add.html" git-doc
need_package "test -f /usr/share/doc/maint-guide/html/index.en.html" maint-guide
need_package "test -f /usr/share/doc/maint-guide-de/html/index.de.html" maint-guide-de
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
python -m pytest -n "${DEDUP_TEST_WORKERS:-auto}" --dist loadfile "$@"  # one worker per core, a test file per worker
rc=$?
if [ "$rc" != 0 ]; then
  echo "ERROR: scripts/test.sh: the test step (pytest) failed (exit status $rc)." >&2
fi
# pytest's 5 means "no tests collected": that is a failure of this command.
exit $rc
