#!/usr/bin/env bash
# Two builds graded side by side on a GPU (--backend cuda), every output compared with the
# run-to-run fields redacted (ci/golden.sh): how a refactor is checked on the hardware. Both run
# at once on the same GPU (its timing lock keeps their timed sections apart).
#
#   ci/gpu-golden.sh BEFORE AFTER OUT
#
# GOLDEN_ONLY=REGEX picks the examples (ci/golden.sh). OUT gets golden.tar.gz (both trees),
# diff.txt and summary.txt. Timings are redacted, so a speed verdict that lands on the other
# side of a tier edge between the two runs shows as a difference: read diff.txt.
set -uo pipefail
before=$(realpath "${1:?usage: ci/gpu-golden.sh BEFORE AFTER OUT}")
after=$(realpath "${2:?usage: ci/gpu-golden.sh BEFORE AFTER OUT}")
out="${3:?usage: ci/gpu-golden.sh BEFORE AFTER OUT}"
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.."
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)" 2>/dev/null) \
  $(dirname "$(find / -xdev -name 'libcublas.so.13' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
for d in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer /opt/nvidia/nsight-compute/*/ /usr/local/NVIDIA-Nsight-Compute*/; do
  [ -d "$d" ] && export PATH="$d:$PATH"
done
work=$(mktemp -d)
export REDACT_MEASURED=1
started=$(date +%s)
# GOLDEN_TIMEOUT (seconds): stop both there; the examples both finished are compared.
limit=${GOLDEN_TIMEOUT:-0}
# GOLDEN_SERIAL=1: one after the other (builds older than the Nsight lock ran ncu sessions
# side by side, and one of them then read no counters).
if [ "${GOLDEN_SERIAL:-0}" = 1 ]; then
  timeout "$limit" bash ci/golden.sh "$before" "$work/before" "" cuda >"$work/before.log" 2>&1
  timeout "$limit" bash ci/golden.sh "$after" "$work/after" "" cuda >"$work/after.log" 2>&1
else
  timeout "$limit" bash ci/golden.sh "$before" "$work/before" "" cuda >"$work/before.log" 2>&1 &
  timeout "$limit" bash ci/golden.sh "$after" "$work/after" "" cuda >"$work/after.log" 2>&1 &
  wait
fi
# An example the timeout cut short in either run is left out of the comparison.
for d in "$work"/before/examples/* "$work"/after/examples/*; do
  n=$(basename "$d")
  if [ ! -f "$work/before/examples/$n/exit" ] || [ ! -f "$work/after/examples/$n/exit" ]; then
    rm -rf "$work/before/examples/$n" "$work/after/examples/$n"
  fi
done
{
  echo "# ci/gpu-golden.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - started)) s"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  "$before" --version 2>&1
  "$after" --version 2>&1
  echo "examples graded: $(ls "$work/before/examples" | wc -l) and $(ls "$work/after/examples" | wc -l)"
  for d in "$work"/after/examples/*/; do
    n=$(basename "$d")
    printf '%-45s exit %s/%s\n' "$n" "$(cat "$work/before/examples/$n/exit" 2>/dev/null)" "$(cat "$d/exit")"
  done
} >"$out/summary.txt"
diff -r "$work/before" "$work/after" >"$out/diff.txt" 2>&1
echo "differing files: $(diff -rq "$work/before" "$work/after" | wc -l)" >>"$out/summary.txt"
tar -czf "$out/golden.tar.gz" -C "$work" before after before.log after.log
cat "$out/summary.txt"
