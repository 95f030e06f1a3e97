#!/usr/bin/env bash
# A prepared check of one NVIDIA machine, in under 8 minutes, printed as one table:
#   1. preflight          soak preflight --backend cuda
#   2. gemm               sustained matmul TFLOP/s per rank against the chip's dense bf16 peak
#   3. collective         all-reduce / all-gather busbw (GB/s, nccl-tests definition)
#   4. soak (3 min)       soak run --backend cuda --workload gemm, with soak exporter --backend cuda
#                         (NVML) scraped every 10 s alongside
#
#   bash benchmarks/device_check.sh [OUT_DIR]      (default: a new temporary folder)
#
# Exit 0 when every step passed, 1 when one failed, 2 when this is no NVIDIA machine.
# Every step has its own timeout; the raw outputs stay in OUT_DIR.
set -u -o pipefail

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "device_check: nvidia-smi not found: this check needs an NVIDIA GPU machine with the driver installed" >&2
    exit 2
fi

OUT=${1:-$(mktemp -d -t soak-device-check.XXXXXX)}
mkdir -p "$OUT"
SOAK=${SOAK:-"python -m soak"}
PY=${PYTHON:-python}
PORT=${SOAK_CHECK_PORT:-19471}
WORK_S=${SOAK_CHECK_WORK_S:-40}     # gemm and collective, each
SOAK_S=${SOAK_CHECK_SOAK_S:-180}    # the soak

# Dense bf16 peak per GPU, TFLOP/s (vendor data sheets, without sparsity).
peak_bf16() {
    case "$1" in
        *H200*|*H100*SXM*|*H100\ 80GB\ HBM3*) echo 989 ;;
        *H100*PCIe*|*H100*NVL*) echo 756 ;;
        *H100*) echo 989 ;;
        *B200*) echo 2250 ;;
        *A100*) echo 312 ;;
        *L40S*) echo 362 ;;
        *A10*) echo 125 ;;
        *) echo "" ;;
    esac
}

GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
N_GPU=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
PEAK=$(peak_bf16 "$GPU_NAME")
declare -A RESULT STATUS

# 1. preflight
timeout 90 $SOAK preflight --backend cuda --expect-chips "$N_GPU" --format json >"$OUT/preflight.json" 2>"$OUT/preflight.err"
rc=$?
STATUS[preflight]=$([ $rc -eq 0 ] && echo pass || echo "fail (exit $rc)")
RESULT[preflight]=$($PY - "$OUT/preflight.json" <<'PYEOF' 2>/dev/null || echo "N/A"
import json, sys
d = json.load(open(sys.argv[1]))
checks = d.get("checks", d if isinstance(d, list) else [])
bad = [c.get("name") for c in checks if c.get("status") == "fail"]
print(f"{len(checks)} checks, failed: {', '.join(bad) or 'none'}")
PYEOF
)

# Median of one heartbeat field over every rank's lines (None when absent).
median_of() {
    $PY - "$1" "$2" <<'PYEOF' 2>/dev/null || echo "N/A"
import glob, json, statistics, sys
vals, ranks = [], set()
for path in glob.glob(f"{sys.argv[1]}/heartbeats/*.jsonl"):
    for line in open(path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get(sys.argv[2]) is not None:
            vals.append(float(rec[sys.argv[2]]))
            ranks.add(path)
print("N/A" if not vals else f"{statistics.median(vals):.1f} {len(ranks)}")
PYEOF
}

# 2. gemm
timeout $((WORK_S + 45)) $SOAK workload gemm --run-dir "$OUT/gemm" --size large --duration-s "$WORK_S" \
    --device-backend cuda >"$OUT/gemm.log" 2>&1
rc=$?
read -r TF RANKS <<<"$(median_of "$OUT/gemm" tflops)"
if [ "$TF" = "N/A" ]; then
    STATUS[gemm]="fail (exit $rc, no step)"; RESULT[gemm]="N/A"
else
    STATUS[gemm]=$([ $rc -eq 0 ] && echo pass || echo "fail (exit $rc)")
    if [ -n "$PEAK" ]; then
        RESULT[gemm]="$TF TFLOP/s per rank ($RANKS ranks) = $($PY -c "print(f'{$TF / $PEAK:.0%}')") of $PEAK bf16 peak"
    else
        RESULT[gemm]="$TF TFLOP/s per rank ($RANKS ranks); bf16 peak of '$GPU_NAME' unknown"
    fi
fi

# 3. collective
timeout $((WORK_S + 45)) $SOAK workload collective --run-dir "$OUT/collective" --size large --duration-s "$WORK_S" \
    --device-backend cuda >"$OUT/collective.log" 2>&1
rc=$?
read -r BW RANKS <<<"$(median_of "$OUT/collective" busbw_gbps)"
STATUS[collective]=$([ $rc -eq 0 ] && [ "$BW" != "N/A" ] && echo pass || echo "fail (exit $rc)")
RESULT[collective]=$([ "$BW" = "N/A" ] && echo "N/A" || echo "median busbw $BW GB/s over $RANKS ranks")

# 4. a 3-minute soak, the NVML exporter scraped alongside
$SOAK exporter --backend cuda --listen "127.0.0.1:$PORT" --interval 5 >"$OUT/exporter.log" 2>&1 &
EXPORTER=$!
timeout $((SOAK_S + 50)) $SOAK run --backend cuda --workload gemm --duration "${SOAK_S}s" --no-preflight \
    --data-dir "$OUT/runs" --run-id device-check --listen "" >"$OUT/soak.log" 2>&1 &
RUN=$!
SCRAPES=0
: >"$OUT/scrapes.prom"
while kill -0 "$RUN" 2>/dev/null; do
    sleep 10
    if $PY -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=5).read().decode())" \
        >>"$OUT/scrapes.prom" 2>/dev/null; then
        SCRAPES=$((SCRAPES + 1))
    fi
done
wait "$RUN"
rc=$?
kill "$EXPORTER" 2>/dev/null
wait "$EXPORTER" 2>/dev/null
SCRAPED=$($PY - "$OUT/scrapes.prom" <<'PYEOF' 2>/dev/null || echo "N/A"
import sys
up = temp = 0
hottest = None
for line in open(sys.argv[1]):
    if line.startswith("soak_device_up{") and line.rsplit(" ", 1)[1].strip() == "1":
        up += 1
    if line.startswith("soak_device_temperature_celsius{"):
        v = float(line.rsplit(" ", 1)[1])
        hottest = v if hottest is None else max(hottest, v)
print(f"{up} device readings up, hottest {'N/A' if hottest is None else f'{hottest:.0f} C'}")
PYEOF
)
STATUS[soak]=$([ $rc -eq 0 ] && [ "$SCRAPES" -gt 0 ] && echo pass || echo "fail (exit $rc)")
RESULT[soak]="${SOAK_S} s, verdict exit $rc; $SCRAPES scrapes: $SCRAPED"

printf '\nsoak device check: %s x %s (%s)\n' "$N_GPU" "${GPU_NAME:-unknown GPU}" "$OUT"
printf '%-11s %-22s %s\n' step status result
for step in preflight gemm collective soak; do
    printf '%-11s %-22s %s\n' "$step" "${STATUS[$step]}" "${RESULT[$step]}"
done
for step in preflight gemm collective soak; do
    [ "${STATUS[$step]}" = pass ] || exit 1
done
exit 0
