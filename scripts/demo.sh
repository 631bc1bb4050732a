#!/usr/bin/env bash
# The main job: start the bundled example site on loopback, crawl it with the
# example spider and scrapy-dedup enabled, end with the duplication report.
source "$(dirname "$0")/_env.sh"
# the demo needs the package alone: no extra, no system package but python3
setup_venv ""
cd "$ROOT"
exec python example_project/run_demo.py "$@"
