#!/usr/bin/env bash
# The test suite with the system tools it uses for real.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

# The system tools the tests use for real (the list: scripts/system-packages.sh). As root, the
# missing ones are installed; otherwise they are named, and the tests that need them skip.
. scripts/system-packages.sh
# shellcheck disable=SC2046
install_system_packages $(missing_system_packages) || true

# Most tests wait on real processes (training ranks, servers, timeouts) more than they compute,
# so they run in parallel workers (SOAK_TEST_WORKERS, default 3; 1 runs everything in order).
# Tests marked `alone` time what they observe on the machine's CPU; they run after, one at a time.
# Exit status 5 (no test selected, e.g. a -k that matches only one part) is not a failure.
workers=${SOAK_TEST_WORKERS:-3}
if [ "$workers" -le 1 ]; then
  exec "$VENV/bin/python" -m pytest -q "$@"
fi
status=0
"$VENV/bin/python" -m pytest -q -n "$workers" -m "not alone" "$@" || status=$?
[ "$status" = 5 ] && status=0
"$VENV/bin/python" -m pytest -q -m alone "$@" || { s=$?; [ "$s" = 5 ] || status=$s; }
exit "$status"
