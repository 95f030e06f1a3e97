#!/usr/bin/env bash
# The test suite with the system tools and the PostgreSQL server it uses for real.
#   scripts/test.sh [PYTEST ARGS]          everything (make test)
#   scripts/test.sh --check [PYTEST ARGS]  the fast tests only: no training, no servers (make check)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=("$VENV/bin/python" -m pytest -q -rs)

check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi

if [ "$check" = 1 ]; then
  # Fast tests compute; two workers use this machine's two cores.
  SOAK_CHECK=1 exec "${PY[@]}" -n "${SOAK_CHECK_WORKERS:-2}" -m "not slow and not pg and not alone" \
    --durations=10 "$@"
fi

# The system tools the tests use for real (the list: scripts/system-packages.sh). As root, the
# missing ones are installed; otherwise they are named, and the tests that need them skip.
. scripts/system-packages.sh
# shellcheck disable=SC2046
install_system_packages $(missing_system_packages) || true

# PostgreSQL for the store's second backend and the cluster runs (scripts/test-db.sh).
. scripts/test-db.sh
if ! prepare_test_db && [ "${CI:-}" = "true" ]; then
  echo "test: CI must test the PostgreSQL backend and the cluster" >&2
  exit 1
fi

# Most tests wait on real processes (training ranks, servers, timeouts) more than they compute,
# so they run in parallel workers (SOAK_TEST_WORKERS, default 3; 1 runs everything in order).
# Tests marked `alone` time what they observe on the machine's CPU; they run after, one at a time.
# Exit status 5 (no test selected, e.g. a -k that matches only one part) is not a failure.
workers=${SOAK_TEST_WORKERS:-3}
if [ "$workers" -le 1 ]; then
  exec "${PY[@]}" --durations=15 "$@"
fi
status=0
"${PY[@]}" -n "$workers" -m "not alone" --durations=15 "$@" || status=$?
[ "$status" = 5 ] && status=0
"${PY[@]}" -m alone --durations=15 "$@" || { s=$?; [ "$s" = 5 ] || status=$s; }
exit "$status"
