#!/usr/bin/env bash
# Fairness under load (issue 29, item 3): the tier-edge SGEMM (siboehm's coalesced kernel,
# which sits at about 0.125x cuBLAS, a tier edge of rubrics/matmul.yaml) graded 5 times inside
# one cohort, beside every matmul example, at --jobs $(nproc): every copy must get the same
# points. No GPU work of one student (correctness runs, compute-sanitizer, Nsight Compute, a
# worker's start) may run beside another's timed section, so the copies' ratios differ only by
# the GPU's own noise, and the tier decision (docs/measurement.md) absorbs that.
#   ci/gpu-fairness.sh BINARY OUTDIR        (JOBS=N to override --jobs; COPIES=5)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:?usage: ci/gpu-fairness.sh BINARY OUTDIR}"); out=${2:?usage: ci/gpu-fairness.sh BINARY OUTDIR}
jobs=${JOBS:-$(nproc)}; copies=${COPIES:-5}
for d in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer /opt/nvidia/nsight-compute/*/; do [ -d "$d" ] && export PATH="$d:$PATH"; done
for d in /usr/local/cuda/lib64 $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)" 2>/dev/null) $(dirname "$(find / -xdev -name 'libcublas.so.13' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
rm -rf "$out/cohort" "$out/graded"; mkdir -p "$out/cohort"
for ex in submissions-example/matmul/*/; do
  name=$(basename "$ex"); mkdir -p "$out/cohort/$name"
  find "$ex" -maxdepth 1 -type f ! -name expected.yaml -exec cp {} "$out/cohort/$name/" \;
done
for i in $(seq 1 "$copies"); do
  d="$out/cohort/edge$i"; mkdir -p "$d"
  cp ci/estimate/ladders/sgemm/2-coalesced/cugrade.yaml "$d/"
  { echo "// copy $i"; cat ci/estimate/ladders/sgemm/2-coalesced/matmul.cu; } > "$d/matmul.cu"
done
start=$(date +%s.%N)
"$bin" grade --rubric rubrics/matmul.yaml "$out/cohort" --out "$out/graded" --backend cuda --jobs "$jobs" --seed 1 \
  >"$out/grade.log" 2>&1
echo "grade exit $? after $(python3 -c "print(round($(date +%s.%N)-$start,1))") s (--jobs $jobs, $(ls "$out/cohort" | wc -l) students)"
python3 - "$out/graded" "$copies" <<'PY'
import json, os, sys
root, copies = sys.argv[1], int(sys.argv[2])
points = []
for i in range(1, copies + 1):
    d = [x for x in os.listdir(os.path.join(root, "students")) if x.startswith("edge%d" % i)][0]
    r = json.load(open(os.path.join(root, "students", d, "result.json")))
    m = [m for m in r["milestones"] if m["id"] == "matmul_tiled"][0]
    perf = [c for c in m["checks"] if c["kind"] == "performance"]
    msg = perf[0]["message"] if perf else "no performance check"
    points.append(m["score"])
    print("edge%d: matmul_tiled %s / %s; %s" % (i, m["score"], m["max_score"], msg[:160]))
same = len(set(points)) == 1
print("gpu-fairness: %s (points %s)" % ("PASS: every copy got the same points" if same else "FAIL: the copies' points differ", points))
sys.exit(0 if same else 1)
PY
