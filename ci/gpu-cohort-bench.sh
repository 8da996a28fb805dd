#!/usr/bin/env bash
# Throughput benchmark on a GPU machine (issue 11 item 6): grade a synthetic 200-student
# reduction cohort with --backend cuda and print the wall time per student and the grader's
# overhead per student-milestone (target: <= 0.3 s per student-milestone, 200 students in
# <= 180 s on one H100/H200). Needs only the prebuilt binary and python3.
#
#   ci/gpu-cohort-bench.sh [BINARY] [OUTDIR]     (defaults: target/release/cugrade, gpu-bench)
#   JOBS="1 16" STUDENTS=200 BENCH_ARGS=--no-numba ci/gpu-cohort-bench.sh ...   (--no-numba: no Numba toolchain)
#
# Runs --jobs $(nproc) (compile and correctness spread over the CPU cores while the GPU times)
# and, unless JOBS says otherwise, --jobs 1 (one student at a time: the per-student cost;
# about 2.5 s per student, so ~8 minutes for 200), and writes OUTDIR/bench-jobs*.json and
# OUTDIR/bench.log for docs/validation/.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/cugrade}; out=${2:-gpu-bench}
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -name 'libnvrtc.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null) $(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
mkdir -p "$out"
{
  echo "# cugrade cohort benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  "$bin" --version
  for jobs in ${JOBS:-$(nproc) 1}; do
    echo; echo "## --jobs $jobs"
    python3 ci/cohort-bench.py --cugrade "$bin" --backend cuda --students "${STUDENTS:-200}" --jobs "$jobs" \
      --json "$out/bench-jobs$jobs.json" ${BENCH_ARGS:-}
  done
} 2>&1 | tee "$out/bench.log"
