#!/usr/bin/env bash
# GPU validation of the measurement protocol (docs/validation/measurement.md). Expects a
# prebuilt, stripped binary at .gpu/cugrade. Usage: ci/gpu-measure.sh OUTDIR PHASE
#   smoke    grade the timing fixtures and one example per baseline kind, print the verdicts
#   repeat   grade the same submissions 10 times (same seed), for identical points and CV
#   cohort   grade a 24-student cohort with --jobs 1 and --jobs 8 on one GPU
#   ncu      cugrade's medians against Nsight Compute's gpu__time_duration
set -uo pipefail
out="$1"; phase="${2:-smoke}"
mkdir -p "$out"
for d in $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)"); do export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
bin=.gpu/cugrade
export CUGRADE_LOCK_DIR="$out/locks" XDG_CACHE_HOME="$out/cache"
summary() { # result.json → one line per performance check
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for m in r["milestones"]:
    for c in m["checks"]:
        if c["kind"] == "performance":
            t = c.get("timing") or {}
            print(f'{r["student"]:<14} {m["id"]:<18} {c["status"]:<7} pts={c.get("points")} meas={c.get("measured")} n={t.get("samples")} noise={t.get("noise")} stop={t.get("stop")} med={t.get("median_ms")} edge={t.get("near_edge")} | {c["message"][:300]}')
print(f'{r["student"]:<14} TOTAL {r["score"]}/{r["max_score"]}')
PY
}
grade() { # rubric submission name
  local s=$(date +%s.%N)
  timeout 300 $bin check --backend cuda --seed 7 --format json --rubric "$1" "$2" > "$out/$3.json" 2> "$out/$3.err"
  echo "exit=$? wall=$(python3 -c "import time;print(round(time.time()-$s,1))")s  $3"
  summary "$out/$3.json" 2>&1 | tail -8
}
case "$phase" in
smoke)
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  for f in honest counter_skip replay slow_serial printf_flood; do grade rubrics/reduction.yaml tests/fixtures/timing/$f "$f"; done
  grade rubrics/reduction.yaml submissions-example/reduction/optimized reduction-optimized
  grade rubrics/matmul.yaml submissions-example/matmul/register_tiled matmul-register-tiled
  grade rubrics/transpose.yaml submissions-example/transpose/tiled transpose-tiled
  ;;
repeat)
  # The reduce_shared bar moved onto its own measured speed (about 245x reduce_naive on an
  # H100): the interval straddles the edge, which must give the same points every time.
  sed -e 's/min: 10$/min: 245/' -e 's/{min: 10, points: 15}/{min: 245, points: 15}/' rubrics/reduction.yaml > rubrics/edge-reduction.yaml
  grep -n "245" rubrics/edge-reduction.yaml
  for k in $(seq 1 10); do
    timeout 300 $bin check --backend cuda --seed 7 --format json --rubric rubrics/edge-reduction.yaml submissions-example/reduction/optimized > "$out/rep-red-$k.json" 2>/dev/null
    timeout 300 $bin check --backend cuda --seed 7 --format json --rubric rubrics/matmul.yaml submissions-example/matmul/register_tiled > "$out/rep-mm-$k.json" 2>/dev/null
    timeout 300 $bin check --backend cuda --seed 7 --format json --rubric rubrics/transpose.yaml submissions-example/transpose/tiled > "$out/rep-tr-$k.json" 2>/dev/null
  done
  python3 - "$out" <<'PY'
import json, sys, glob, statistics as st
out = sys.argv[1]
for tag in ["red", "mm", "tr"]:
    rows = {}
    for f in sorted(glob.glob(f"{out}/rep-{tag}-*.json")):
        r = json.load(open(f))
        for m in r["milestones"]:
            for c in m["checks"]:
                if c["kind"] != "performance": continue
                t = c.get("timing") or {}
                rows.setdefault((m["id"], c["name"]), []).append((c.get("points"), c.get("measured"), t.get("median_ms"), t.get("near_edge"), r["score"]))
    for (mid, name), v in rows.items():
        pts = sorted(set(x[0] for x in v)); scores = sorted(set(x[4] for x in v))
        meas = [x[1] for x in v if x[1]]; med = [x[2] for x in v if x[2]]
        cv = lambda xs: st.stdev(xs) / st.mean(xs) * 100 if len(xs) > 1 else 0
        print(f"{tag} {mid}/{name}: runs={len(v)} points={pts} totals={scores} ratio {min(meas):.4f}..{max(meas):.4f} (cv {cv(meas):.2f} %) median_ms {min(med):.4f}..{max(med):.4f} (cv {cv(med):.2f} %) near_edge={sorted(set(str(x[3]) for x in v))}")
PY
  ;;
cohort)
  # 24 students from the reduction examples and the timing fixtures, graded twice on one GPU.
  rm -rf "$out/cohort"; mkdir -p "$out/cohort"; k=0
  while [ $k -lt 24 ]; do
    for s in submissions-example/reduction/* tests/fixtures/timing/*; do
      [ -d "$s" ] || continue; [ $k -lt 24 ] || break
      cp -r "$s" "$out/cohort/s$(printf %02d $k)-$(basename "$s")"; rm -f "$out/cohort/"*/expected.yaml; k=$((k+1))
    done
  done
  for j in 1 8; do
    s=$(date +%s.%N)
    timeout 580 $bin grade --backend cuda --seed 7 --jobs $j --rubric rubrics/reduction.yaml "$out/cohort" --out "$out/grade-j$j" > "$out/grade-j$j.log" 2>&1
    echo "jobs=$j exit=$? wall=$(python3 -c "import time;print(round(time.time()-$s,1))")s"
  done
  if diff <(cut -d, -f1- "$out/grade-j1/grades.csv") <(cut -d, -f1- "$out/grade-j8/grades.csv"); then echo "grades.csv identical for --jobs 1 and --jobs 8"; else echo "grades.csv DIFFER"; fi
  cat "$out/grade-j1/grades.csv"
  ;;
ncu)
  # cugrade's median against Nsight Compute's gpu__time_duration.sum for the same kernel on the
  # same case, with the cache flushed (ncu --cache-control all; cugrade's default, cold) and not
  # (--cache-control none; a rubric copy with `cache: warm`). Clocks as they are (no locking).
  export PATH=/usr/local/cuda/bin:$PATH
  mkdir -p "$out/ncu"
  python3 - <<'PY'
import re
for lab in ["reduction", "matmul", "transpose"]:
    s = open(f"rubrics/{lab}.yaml").read()
    head, perf = s.split("  performance:\n", 1)
    perf = re.sub(r"\}\}", "}, cache: warm}", perf, count=1)
    open(f"rubrics/warm-{lab}.yaml", "w").write(head + "  performance:\n" + perf)
PY
  jobs=""
  while read -r lab src kernels; do
    for k in $kernels; do
      tag="$lab-$(basename "$(dirname "$src")")-$(basename "$src" .cu)-$k"
      echo "$tag $lab $src $k" >> "$out/ncu/list"
      up=$(echo "$lab" | tr a-z A-Z)
      (nvcc -O3 -arch=sm_90 -o "$out/ncu/$tag" -DSRC="\"$PWD/$src\"" -DKERNEL=$k -DLAB_$up ci/ncu/driver.cu > "$out/ncu/$tag.nvcc" 2>&1 || echo "nvcc failed: $tag") &
    done
  done <<'LIST'
reduction reference-kernels/reduction.cu reduce_shared reduce_shuffle
reduction submissions-example/reduction/optimized/reduce.cu reduce_shared reduce_shuffle
reduction submissions-example/reduction/naive/reduce.cu reduce_shared reduce_shuffle
matmul reference-kernels/matmul.cu matmul_tiled
matmul submissions-example/matmul/transposed_operand/matmul.cu matmul_tiled
transpose reference-kernels/transpose.cu transpose_coalesced
transpose submissions-example/transpose/tiled/transpose.cu transpose_coalesced
transpose submissions-example/transpose/bank_conflicts/transpose.cu transpose_coalesced
LIST
  wait
  while read -r tag lab src k; do
    for cc in all none; do
      timeout 120 ncu --csv --metrics gpu__time_duration.sum --cache-control $cc --clock-control none -k "regex:^$k\$" --launch-skip 5 --launch-count 15 "$out/ncu/$tag" > "$out/ncu/$tag.$cc.csv" 2> "$out/ncu/$tag.$cc.err"
    done
    for mode in cold warm; do
      r=rubrics/$lab.yaml; [ $mode = warm ] && r=rubrics/warm-$lab.yaml
      sub="$src"; case "$src" in submissions-example/*) sub=$(dirname "$src");; esac
      timeout 120 $bin check --backend cuda --seed 7 --format json --rubric $r "$sub" > "$out/ncu/$tag.$mode.json" 2>/dev/null
    done
  done < "$out/ncu/list"
  python3 - "$out/ncu" <<'PY'
import csv, glob, json, os, statistics, sys
d = sys.argv[1]
scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}
def ncu_ms(path):
    try:
        rows = [r for r in csv.reader(open(path)) if len(r) > 5]
    except FileNotFoundError:
        return None
    if not rows: return None
    h = rows[0]; vi, ui = h.index("Metric Value"), h.index("Metric Unit")
    v = [float(r[vi].replace(",", "")) * scale.get(r[ui], float("nan")) for r in rows[1:] if r[vi] not in ("", "Metric Value")]
    return statistics.median(v) if v else None
def cg_ms(path, kernel):
    try: r = json.load(open(path))
    except Exception: return None
    for m in r["milestones"]:
        if m.get("kernel") != kernel: continue
        for c in m["checks"]:
            t = c.get("timing")
            if t and t.get("median_ms"): return t["median_ms"]
    return None
print(f'{"kernel":<62} {"ncu cold":>9} {"cugrade cold":>12} {"diff":>7} {"ncu warm":>9} {"cugrade warm":>12} {"diff":>7}')
for line in open(f"{d}/list"):
    tag, lab, src, k = line.split()
    nc, nw = ncu_ms(f"{d}/{tag}.all.csv"), ncu_ms(f"{d}/{tag}.none.csv")
    cc, cw = cg_ms(f"{d}/{tag}.cold.json", k), cg_ms(f"{d}/{tag}.warm.json", k)
    f = lambda x: f"{x:.4f}" if x else "-"
    df = lambda a, b: f"{100*(b-a)/a:+.1f}%" if a and b else "-"
    print(f"{tag:<62} {f(nc):>9} {f(cc):>12} {df(nc,cc):>7} {f(nw):>9} {f(cw):>12} {df(nw,cw):>7}")
PY
  ;;
esac
