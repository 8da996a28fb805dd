#!/usr/bin/env bash
# The preprocess lab (a Python function lab, docs/labs/preprocess.md) on a GPU machine: every
# example graded by cugrade on the cuda backend with the machine's own CuPy (result.json and
# the terminal report of each), `cugrade doctor`'s lines about NumPy and CuPy, and the
# in-process benchmark ci/gpu-preprocess-bench.py for comparison (no cugrade).
# Usage: ci/gpu-preprocess.sh BINARY OUTDIR   (no network, no Rust; needs python3 with CuPy)
set -uo pipefail
bin=$(realpath "${1:?usage: ci/gpu-preprocess.sh BINARY OUTDIR}")
out="${2:?usage: ci/gpu-preprocess.sh BINARY OUTDIR}"
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.."
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
export CUGRADE_NVRTC_CACHE="$out/cache"
log="$out/gpu-preprocess.log"
{
  echo "# ci/gpu-preprocess.sh, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  "$bin" --version
  python3 -c 'import sys, numpy, cupy; print(sys.version.split()[0], "numpy", numpy.__version__, "cupy", cupy.__version__)' 2>&1
  "$bin" doctor 2>&1 | grep -i -E "python function|numpy|cupy" || true
} >"$log" 2>&1
for d in submissions-example/preprocess/*/; do
  n=$(basename "$d")
  start=$(date +%s.%N)
  "$bin" check --backend cuda --seed 1 --rubric rubrics/preprocess.yaml "$d" \
    --json "$out/$n.json" >"$out/$n.txt" 2>&1
  rc=$?
  {
    echo "== $n: exit $rc, $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$(date +%s.%N)") s"
    python3 - "$out/$n.json" <<'PY' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
for m in r["milestones"]:
    print(" ", m["id"], m["status"], m["score"], "/", m["max_score"])
    for c in m["checks"]:
        print("   ", c["name"], c["status"], c.get("points", ""), "|", c["message"][:300])
        if c["kind"] == "performance" and c.get("details"):
            print("     ", c["details"].replace("\n", "\n      "))
print("  notes:", r["run"].get("notes"))
PY
  } >>"$log"
done
[ "${SKIP_BENCH:-0}" = 1 ] || timeout 240 python3 ci/gpu-preprocess-bench.py "$out/bench" >>"$log" 2>&1 || echo "bench: exit $?" >>"$log"
cp "$out/bench/gpu-preprocess.log" "$out/bench.log" 2>/dev/null
rm -rf "$out/cache" "$out/bench"
tar -C "$out" -czf "$out/results.tgz" --exclude results.tgz --exclude gpu-preprocess.log --exclude bench.log . 2>/dev/null
find "$out" -mindepth 1 -maxdepth 1 ! -name results.tgz ! -name gpu-preprocess.log ! -name bench.log -exec rm -rf {} +
cat "$log"
