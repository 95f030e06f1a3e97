#!/usr/bin/env bash
# The test suite with the system tools and the PostgreSQL server it uses for real.
#   scripts/test.sh [PYTEST ARGS]          everything (make test)
#   scripts/test.sh --check [PYTEST ARGS]  the fast tests only: no training, no servers (make check)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=("$VENV/bin/python" -m pytest -q -rs)
# The suite starts hundreds of Python processes (pytest's workers, agents, ranks, the simulated
# npu-smi at every tick): they read their bytecode from the cache, whatever this variable says,
# instead of each compiling soak and the tests again.
unset PYTHONDONTWRITEBYTECODE

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
# so they run in parallel workers (SOAK_TEST_WORKERS, default 4; 1 runs everything in order), in
# the order tests/conftest.py gives them: the cluster runs in two lanes of their own, the slow
# tests first. Tests marked `alone` time what they observe on the machine's CPU; they run after,
# one at a time. The tests that only compute (those of make check, and those marked `compute`)
# run from the start in a background lane with a small CPU share (background_lane): the CPU the
# parallel workers leave idle while they wait (about a sixth of it), and most of the second core
# that the alone tests leave. Its output is printed once the alone tests end. Exit status 5 (no
# test selected, e.g. a -k that matches only one part) is not a failure.
BACKGROUND="not pg and not alone and (not slow or compute)"
PARALLEL="not alone and not ($BACKGROUND)"

# background_lane LOG COMMAND...: COMMAND with a small CPU share (a twentieth of another session's),
# its output into LOG. As root where the kernel has cgroup v1's cpu controller: a cgroup of its
# own with cpu.shares 50 (a session's is 1024), which keeps every process it starts, those in
# new sessions too. Elsewhere: nice 10, and the same for its session's autogroup (a new session:
# without it the autogroup scheduler shares the CPU between sessions, whatever nice says).
background_lane() {
  local log=$1; shift
  local cg=/sys/fs/cgroup/cpu/soak-test-$$
  if [ "$(id -u)" = 0 ] && mkdir "$cg" 2>/dev/null && echo 50 >"$cg/cpu.shares"; then
    (echo "$BASHPID" >"$cg/cgroup.procs" && exec "$@") >"$log" 2>&1
    local s=$?
    rmdir "$cg" 2>/dev/null || true
    return $s
  fi
  rmdir "$cg" 2>/dev/null || true
  setsid -w bash -c 'echo 10 >/proc/self/autogroup 2>/dev/null; exec nice -n 10 "$@"' _ "$@" >"$log" 2>&1
}

workers=${SOAK_TEST_WORKERS:-4}
status=0
if [ "$workers" -le 1 ]; then
  "${PY[@]}" --durations=30 "$@" || status=$?
  phase_time "the tests, in order,"
else
  lane_log=$(mktemp "${TMPDIR:-/tmp}/soak-test-lane.XXXXXX")
  background_lane "$lane_log" "${PY[@]}" -n 2 --dist loadgroup -m "$BACKGROUND" --durations=10 "$@" &
  lane=$!
  trap 'kill "$lane" 2>/dev/null || true' EXIT  # under set -e a failed kill would be the exit status
  "${PY[@]}" -n "$workers" --dist loadgroup --no-loadscope-reorder -m "$PARALLEL" --durations=30 "$@" \
    || status=$?
  [ "$status" = 5 ] && status=0
  phase_time "the parallel phase ($workers workers)"
  "${PY[@]}" -m alone --durations=15 "$@" || { s=$?; [ "$s" = 5 ] || status=$s; }
  phase_time "the alone tests (one at a time)"
  lane_status=0
  wait "$lane" || lane_status=$?
  echo "test: the computing tests, in the background lane (their output):" >&2
  cat "$lane_log"
  rm -f "$lane_log"
  [ "$lane_status" = 0 ] || [ "$lane_status" = 5 ] || status=$lane_status
  phase_time "the computing tests after the alone ones ended"
fi
s=$((SECONDS - started))
printf 'test: all phases took %dm%02ds\n' $((s / 60)) $((s % 60)) >&2
exit "$status"
