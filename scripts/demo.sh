#!/usr/bin/env bash
# The main job: start the bundled example site on loopback, crawl it with the
# example spider and scrapy-dedup enabled, end with the duplication report.
source "$(dirname "$0")/_env.sh"
setup_venv test
cd "$ROOT"
exec python example_project/run_demo.py "$@"
