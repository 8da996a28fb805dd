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
#
# Several GPUs (issue 23): GPUS="0 0,1" runs `grade --gpus 0` and then `--gpus 0,1`, each with
# --jobs ${JOBS:-$(nproc)} (one value: the same jobs for every run), and prints each wall time,
# the speed-up of every run over the first, and whether grades.csv is identical between the runs
# (grades.csv holds no timings; a difference is listed cell by cell). Writes
# OUTDIR/bench-gpus*.json, OUTDIR/grades-gpus*.csv and OUTDIR/bench.log.
#   GPUS="0 0,1" STUDENTS=200 ci/gpu-cohort-bench.sh target/release/cugrade gpu-bench-x2
# (BACKEND=emu: the same runs on the PTX emulator, a smoke test of the script without a GPU.)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/cugrade}; out=${2:-gpu-bench}
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -name 'libnvrtc.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null) $(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
mkdir -p "$out"
{
  echo "# cugrade cohort benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,clocks.max.sm --format=csv,noheader
  "$bin" --version
  if [ -n "${GPUS:-}" ]; then
    jobs=${JOBS:-$(nproc)}
    tags=()
    for g in $GPUS; do
      tag="gpus${g//,/-}"; tags+=("$tag")
      echo; echo "## --gpus $g --jobs $jobs"
      python3 ci/cohort-bench.py --cugrade "$bin" --backend "${BACKEND:-cuda}" --students "${STUDENTS:-200}" --jobs "$jobs" \
        --gpus "$g" --json "$out/bench-$tag.json" --grades "$out/grades-$tag.csv" ${BENCH_ARGS:-}
    done
    echo; echo "## comparison"
    python3 - "$out" "${tags[@]}" <<'PY'
import csv, json, os, sys
out, tags = sys.argv[1], sys.argv[2:]
runs = []
for t in tags:
    try:
        with open(os.path.join(out, "bench-%s.json" % t)) as f:
            fig = json.load(f)
        with open(os.path.join(out, "grades-%s.csv" % t)) as f:
            rows = list(csv.reader(f))
    except OSError as e:
        print("%s: no result (%s)" % (t, e)); continue
    runs.append((t, fig, rows))
if not runs:
    sys.exit("no run finished")
t0, f0, g0 = runs[0]
for t, f, g in runs:
    print("%-12s wall %7.1f s  (%d students, --jobs %d, GPUs %s)  speed-up over %s: %.2fx"
          % (t, f["wall_s"], f["students"], f["jobs"], f.get("gpus") or "?", t0,
             f0["wall_s"] / f["wall_s"] if f["wall_s"] else float("nan")))
for t, f, g in runs[1:]:
    if g == g0:
        print("grades.csv of %s and %s: identical (%d rows)" % (t0, t, len(g) - 1))
        continue
    print("grades.csv of %s and %s: DIFFERENT" % (t0, t))
    head = g0[0] if g0 else []
    key = head.index("id") if "id" in head else 0
    a = {r[key]: r for r in g0[1:]}
    b = {r[key]: r for r in g[1:]}
    for k in sorted(set(a) | set(b)):
        ra, rb = a.get(k), b.get(k)
        if ra != rb:
            cells = [(head[i], x, y) for i, (x, y) in enumerate(zip(ra or [], rb or [])) if x != y]
            print("  %s: %s" % (k, cells if ra and rb else "missing in one run"))
PY
  else
    for jobs in ${JOBS:-$(nproc) 1}; do
      echo; echo "## --jobs $jobs"
      python3 ci/cohort-bench.py --cugrade "$bin" --backend "${BACKEND:-cuda}" --students "${STUDENTS:-200}" --jobs "$jobs" \
        --json "$out/bench-jobs$jobs.json" ${BENCH_ARGS:-}
    done
  fi
} 2>&1 | tee "$out/bench.log"
