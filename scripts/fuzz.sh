#!/usr/bin/env bash
# The fuzz suites at length (make fuzz): each suite's fuzz test runs CASES cases (default
# 10000), in parts small enough for the test timeout (pyproject.toml), each part from its own
# seed. The suite itself (make test) runs a few cases of each; this is the long hunt.
#
#   scripts/fuzz.sh                  every suite, 10000 cases each
#   scripts/fuzz.sh -n 300           300 cases each (a quick check that the hunt runs)
#   scripts/fuzz.sh -n 2000 store    one suite (csv, plan, store, verify)
#   scripts/fuzz.sh -j 2 store       two parts at a time (one per core: the store's 10000 cases
#                                    took 82 min on two cores busy with other work too)
#
# A part that fails names its seed and case: SOAK_FUZZ_SEED=S SOAK_FUZZ_CASES=N replays it
# (the line printed gives the command). Prints one line per suite; exit 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
unset PYTHONDONTWRITEBYTECODE

cases=10000
jobs=1
seed0=${FUZZ_SEED:-1}
while [ $# -gt 0 ]; do
    case $1 in
        -n) cases=$2; shift 2 ;;
        -j) jobs=$2; shift 2 ;;
        -*) echo "fuzz.sh: unknown option $1 (-n CASES, -j PARTS_AT_A_TIME, then suite names)" >&2; exit 2 ;;
        *) break ;;
    esac
done
case $cases in ''|*[!0-9]*|0) echo "fuzz.sh: -n $cases: a positive number of cases" >&2; exit 2 ;; esac
case $jobs in ''|*[!0-9]*|0) echo "fuzz.sh: -j $jobs: a positive number of parts at a time" >&2; exit 2 ;; esac

# suite -> its fuzz test and the cases one part runs within the 300 s timeout on a loaded
# two-core machine (a store case writes a damaged database and runs two commands on it, the
# PDF most of its 0.8 s)
declare -A TEST=(
    [csv]="tests/fuzz/test_fuzz_csv.py::test_fuzzed_trace_csvs_are_analysed_or_one_line_errors"
    [plan]="tests/fuzz/test_fuzz_plan.py::test_fuzzed_plans_and_profiles_are_one_line_errors"
    [store]="tests/fuzz/test_fuzz_store.py::test_report_of_a_store_with_damaged_pages_is_a_report_or_one_line"
    [verify]="tests/fuzz/test_fuzz_verify.py::test_fuzzed_signed_reports_fail_or_are_refused_never_pass_nor_a_traceback"
)
declare -A PART=([csv]=1000 [plan]=1000 [store]=100 [verify]=500)
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(csv plan store verify)
for s in "${suites[@]}"; do
    [ -n "${TEST[$s]:-}" ] || { echo "fuzz.sh: unknown suite $s (csv, plan, store, verify)" >&2; exit 2; }
done

logs=${FUZZ_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
# one part: its cases from its own seed; on failure the line that replays it, in the part's
# status file (parts may run side by side)
run_part() {  # suite seed cases log status
    if SOAK_FUZZ_SEED=$2 SOAK_FUZZ_CASES=$3 "$PY" -m pytest -q -p no:cacheprovider -m "" "${TEST[$1]}" \
            >"$4" 2>&1; then
        echo ok >"$5"
    else
        echo "seed $2, $3 cases: see $4; replay: SOAK_FUZZ_SEED=$2 SOAK_FUZZ_CASES=$3 $PY -m pytest -m '' ${TEST[$1]}" >"$5"
    fi
}

failed=0
for s in "${suites[@]}"; do
    part=${PART[$s]}
    [ "$part" -le "$cases" ] || part=$cases
    parts=$(( (cases + part - 1) / part ))
    started=$SECONDS
    bad=""
    for ((k = 0; k < parts; k++)); do
        n=$(( k == parts - 1 ? cases - k * part : part ))
        seed=$((seed0 + k))
        run_part "$s" "$seed" "$n" "$logs/$s-seed$seed.log" "$logs/$s-seed$seed.status" &
        if (( (k + 1) % jobs == 0 || k == parts - 1 )); then
            wait
            for ((j = k - (k % jobs); j <= k; j++)); do
                st=$(cat "$logs/$s-seed$((seed0 + j)).status")
                [ "$st" = ok ] || { bad="part $((j + 1))/$parts ($st)"; break; }
            done
            [ -z "$bad" ] || break
        fi
    done
    if [ -n "$bad" ]; then
        echo "fuzz $s: FAILED in $bad"
        failed=1
    else
        echo "fuzz $s: $cases cases in $parts part(s), seeds $seed0..$((seed0 + parts - 1)): no traceback" \
             "($((SECONDS - started)) s)"
    fi
done
exit $failed
