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

# Each phase's wall time is printed after it, and the total at the end: what makes the suite slow
# is seen in every run.
started=$SECONDS
phase_started=$SECONDS
phase_time() {  # NAME: the wall time since the last phase ended, then the next phase starts
  local s=$((SECONDS - phase_started))
  printf 'test: %s took %dm%02ds\n' "$1" $((s / 60)) $((s % 60)) >&2
  phase_started=$SECONDS
}

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
phase_time "the setup (system tools, PostgreSQL)"

# Most tests wait on real processes (training ranks, servers, timeouts) more than they compute,
# so they run in parallel workers (SOAK_TEST_WORKERS, default 3; 1 runs everything in order).
# Tests marked `alone` time what they observe on the machine's CPU; they run after, one at a time.
# Exit status 5 (no test selected, e.g. a -k that matches only one part) is not a failure.
workers=${SOAK_TEST_WORKERS:-3}
status=0
if [ "$workers" -le 1 ]; then
  "${PY[@]}" --durations=30 "$@" || status=$?
  phase_time "the tests, in order,"
else
  "${PY[@]}" -n "$workers" -m "not alone" --durations=30 "$@" || status=$?
  [ "$status" = 5 ] && status=0
  phase_time "the parallel phase ($workers workers)"
  "${PY[@]}" -m alone --durations=15 "$@" || { s=$?; [ "$s" = 5 ] || status=$s; }
  phase_time "the alone phase (one at a time)"
fi
s=$((SECONDS - started))
printf 'test: all phases took %dm%02ds\n' $((s / 60)) $((s % 60)) >&2
exit "$status"
