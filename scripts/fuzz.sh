#!/usr/bin/env bash
# The fuzz suites at length (make fuzz): each suite's fuzz test runs CASES cases (default
# 10000), in parts small enough for the test timeout (pyproject.toml), each part from its own
# seed. The suite itself (make test) runs a few cases of each; this is the long hunt.
#
#   scripts/fuzz.sh                  every suite, 10000 cases each
#   scripts/fuzz.sh -n 300           300 cases each (a quick check that the hunt runs)
#   scripts/fuzz.sh -n 2000 store    one suite (csv, plan, store, verify)
#
# A part that fails names its seed and case: SOAK_FUZZ_SEED=S SOAK_FUZZ_CASES=N replays it
# (the line printed gives the command). Prints one line per suite; exit 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
unset PYTHONDONTWRITEBYTECODE

cases=10000
seed0=${FUZZ_SEED:-1}
while [ $# -gt 0 ]; do
    case $1 in
        -n) cases=$2; shift 2 ;;
        -*) echo "fuzz.sh: unknown option $1 (-n CASES, then suite names)" >&2; exit 2 ;;
        *) break ;;
    esac
done
case $cases in ''|*[!0-9]*|0) echo "fuzz.sh: -n $cases: a positive number of cases" >&2; exit 2 ;; esac

# suite -> its fuzz test and the cases one part runs within the 300 s timeout on a loaded
# two-core machine (a store case writes a damaged database and runs two commands on it)
declare -A TEST=(
    [csv]="tests/fuzz/test_fuzz_csv.py::test_fuzzed_trace_csvs_are_analysed_or_one_line_errors"
    [plan]="tests/fuzz/test_fuzz_plan.py::test_fuzzed_plans_and_profiles_are_one_line_errors"
    [store]="tests/fuzz/test_fuzz_store.py::test_report_of_a_store_with_damaged_pages_is_a_report_or_one_line"
    [verify]="tests/fuzz/test_fuzz_verify.py::test_fuzzed_signed_reports_fail_or_are_refused_never_pass_nor_a_traceback"
)
declare -A PART=([csv]=1000 [plan]=1000 [store]=40 [verify]=500)
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(csv plan store verify)
for s in "${suites[@]}"; do
    [ -n "${TEST[$s]:-}" ] || { echo "fuzz.sh: unknown suite $s (csv, plan, store, verify)" >&2; exit 2; }
done

logs=${FUZZ_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
failed=0
for s in "${suites[@]}"; do
    part=${PART[$s]}
    [ "$part" -le "$cases" ] || part=$cases
    parts=$(( (cases + part - 1) / part ))
    started=$SECONDS
    ok=1
    for ((k = 0; k < parts; k++)); do
        n=$(( k == parts - 1 ? cases - k * part : part ))
        seed=$((seed0 + k))
        log="$logs/$s-seed$seed.log"
        if ! SOAK_FUZZ_SEED=$seed SOAK_FUZZ_CASES=$n "$PY" -m pytest -q -p no:cacheprovider -m "" "${TEST[$s]}" \
                >"$log" 2>&1; then
            echo "fuzz $s: FAILED in part $((k + 1))/$parts (seed $seed, $n cases): see $log;" \
                 "replay: SOAK_FUZZ_SEED=$seed SOAK_FUZZ_CASES=$n $PY -m pytest -m '' ${TEST[$s]}"
            ok=0 failed=1
            break
        fi
    done
    if [ "$ok" = 1 ]; then
        echo "fuzz $s: $cases cases in $parts part(s), seeds $seed0..$((seed0 + parts - 1)): no traceback" \
             "($((SECONDS - started)) s)"
    fi
done
exit $failed
