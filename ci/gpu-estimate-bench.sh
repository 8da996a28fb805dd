#!/usr/bin/env bash
# The GPU side of the speed estimate's calibration benchmark (docs/estimate.md). On a GPU
# machine, with the stripped release binary:
#   grade  every lab's reference kernels (reference-kernels/LAB.cu graded as a submission),
#          every CUDA example submission (submissions-example/LAB/*) and the validation
#          ladders (ci/estimate/ladders: SGEMM 4096^3, transpose 8192^2) with --backend
#          cuda, one cohort per lab (`grade --jobs 8`; timed sections hold the GPU alone).
#          Every performance check's result.json records the kernel's median
#          (timing.median_ms, cold L2) and a GPU baseline's (timing.baseline.median_ms:
#          the reference kernel, cuBLAS, the device copy).
#   ncu    the reference kernels, the ladders and then the examples once more under
#          `check --profile`, with Nsight Compute's counters that the cost model has
#          counterparts of (DRAM and L2 traffic, L1 hit rates, shared wavefronts, issue
#          activity, occupancy), kept as raw CSV.
#   all    both (about 10 minutes on an H100: two device calls are safer).
# Each phase stops starting new work after PHASE_S seconds (default 520), so that it ends
# inside one 10-minute device call; what it skipped is listed in OUTDIR/skipped.txt.
# Results: OUTDIR/estimate-bench.tgz (result.json files and ncu CSVs) and a summary on
# stdout. On the development machine, `cargo run --release --example estimate_bench -- DIR`
# (DIR: where the archives were unpacked) prints estimated vs measured per kernel
# (docs/estimate.md, "Calibration").
#
# Usage: ci/gpu-estimate-bench.sh BINARY OUTDIR [grade|ncu|all]
#   LABS="matmul transpose" limits the labs; BACKEND=emu tries the mechanics without a GPU.
set -uo pipefail
bin=$(realpath "$1"); out="$2"; phase="${3:-grade}"
mkdir -p "$out"; out=$(realpath "$out")
limit="${PHASE_S:-520}"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)" 2>/dev/null) $(dirname "$(find / -xdev -name 'libcublas.so.13' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export PATH="/usr/local/cuda/bin:$PATH"
export CUGRADE_LOCK_DIR="$out/locks" XDG_CACHE_HOME="$out/cache"
labs=(${LABS:-$(ls rubrics | sed 's/\.yaml$//')})
backend="${BACKEND:-cuda}"
{
  echo "# estimate bench, $(date -u +%Y-%m-%dT%H:%MZ), phase $phase"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader
  "$bin" --version
} | tee "$out/machine.txt"

# One folder per entry: the reference file, the CUDA examples (Numba ones need the toolchain
# that ci/gpu-numba.sh installs: left out) and, for matmul, transpose, softmax and reduction,
# the held-out ladders (ci/estimate/ladders/).
entries() { # lab -> "name path" lines
  local lab="$1"
  echo "reference reference-kernels/$lab.cu"
  for s in submissions-example/"$lab"/*/; do
    case "$(basename "$s")" in numba_*) continue;; esac
    echo "$(basename "$s") $s"
  done
  case "$lab" in
    matmul) for s in ci/estimate/ladders/sgemm/*/; do echo "sgemm-$(basename "$s") $s"; done;;
    transpose) for s in ci/estimate/ladders/transpose/*/; do echo "transpose-$(basename "$s") $s"; done;;
    softmax) for s in ci/estimate/ladders/softmax/*/; do echo "softmax-$(basename "$s") $s"; done;;
    reduction) for s in ci/estimate/ladders/reduction/*/; do echo "reduction-$(basename "$s") $s"; done;;
  esac
  for s in ci/estimate/ladders/round2/"$lab"-*/; do [ -d "$s" ] && echo "round2-$(basename "$s") $s"; done
}
started=$(date +%s)
over() { [ $(( $(date +%s) - started )) -ge "$limit" ]; }

grade_phase() {
  mkdir -p "$out/grade" "$out/cohorts"
  for lab in "${labs[@]}"; do
    if over; then echo "grade $lab" >> "$out/skipped.txt"; continue; fi
    local c="$out/cohorts/$lab"; rm -rf "$c"; mkdir -p "$c"
    while read -r name path; do
      mkdir -p "$c/$name"
      if [ -d "$path" ]; then cp -r "$path"/. "$c/$name/"; rm -f "$c/$name/expected.yaml"; else cp "$path" "$c/$name/"; fi
    done < <(entries "$lab")
    local s=$(date +%s)
    timeout 300 "$bin" grade --backend "$backend" --seed 7 --jobs 8 --rubric "rubrics/$lab.yaml" "$c" --out "$out/grade/$lab" > "$out/grade/$lab.log" 2>&1
    echo "grade $lab: exit=$? $(( $(date +%s) - s ))s"
  done
}

# Counters Nsight Compute measures that the cost model estimates (filtered against what this
# ncu knows, so that one unknown name cannot void the whole profile).
NCU_EXTRA="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,smsp__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,lts__t_sector_hit_rate.pct,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed.sum,smsp__thread_inst_executed.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_lsu.sum,sm__inst_executed_pipe_xu.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__waves_per_multiprocessor,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed"

ncu_phase() {
  if ! command -v ncu >/dev/null; then echo "ncu: not on PATH; phase skipped" | tee -a "$out/skipped.txt"; return; fi
  ncu --version | tail -1 | tee -a "$out/machine.txt"
  local known="$out/ncu-known.txt"
  ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' | grep '__' | sort -u > "$known"
  local extra=""
  if [ "$(wc -l < "$known")" -gt 100 ]; then
    for m in ${NCU_EXTRA//,/ }; do
      if grep -qx "${m%%.*}" "$known"; then extra="$extra${extra:+,}$m"; else echo "ncu: unknown metric $m (left out)" | tee -a "$out/skipped.txt"; fi
    done
  else
    extra="$NCU_EXTRA"
  fi
  mkdir -p "$out/ncu"
  local list=()
  for lab in "${labs[@]}"; do list+=("$lab reference reference-kernels/$lab.cu"); done
  for s in ci/estimate/ladders/sgemm/*/; do list+=("matmul sgemm-$(basename "$s") $s"); done
  for s in ci/estimate/ladders/transpose/*/; do list+=("transpose transpose-$(basename "$s") $s"); done
  # Then the examples (their wrong kernels are not profiled: `--profile` profiles correct ones).
  for lab in "${labs[@]}"; do
    while read -r name path; do
      [ "$name" = reference ] && continue
      case "$name" in sgemm-*|transpose-*) continue;; esac
      list+=("$lab $name $path")
    done < <(entries "$lab")
  done
  for e in "${list[@]}"; do
    read -r lab name path <<< "$e"
    if over; then echo "ncu $lab $name" >> "$out/skipped.txt"; continue; fi
    local d="$out/ncu/$lab/$name"; mkdir -p "$d"
    local s=$(date +%s)
    CUGRADE_NCU_EXTRA_METRICS="$extra" CUGRADE_NCU_KEEP="$d" timeout 200 "$bin" check --backend "$backend" --seed 7 --profile --rubric "rubrics/$lab.yaml" "$path" --json "$d/result.json" > "$d/check.txt" 2>&1
    echo "ncu $lab $name: exit=$? $(( $(date +%s) - s ))s, $(ls "$d" | grep -c '\.csv$') kernel(s) profiled"
  done
}

summary() {
  python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(f"{out}/grade/*/*/result.json") + glob.glob(f"{out}/grade/*/students/*/result.json")):
    lab = f.split("/grade/")[1].split("/")[0]
    try:
        r = json.load(open(f))
    except Exception as e:
        print(f"unreadable {f}: {e}"); continue
    for m in r["milestones"]:
        for c in m["checks"]:
            if c["kind"] != "performance":
                continue
            t = c.get("timing") or {}
            b = t.get("baseline") or {}
            med = t.get("median_ms")
            bm = b.get("median_ms") if b.get("paired") else None
            rows.append((lab, r["student"], m["id"], c["name"], c["status"], med, b.get("kind", "-"), bm))
print(f'{"lab":<12} {"submission":<28} {"milestone":<20} {"check":<18} {"status":<7} {"kernel ms":>10} {"baseline":<24} {"baseline ms":>11}')
for lab, s, mid, name, st, med, bk, bm in rows:
    f = lambda x: f"{x:.4f}" if isinstance(x, (int, float)) else "-"
    print(f"{lab:<12} {s:<28} {mid:<20} {name:<18} {st:<7} {f(med):>10} {bk:<24} {f(bm):>11}")
print(f"{len(rows)} performance checks, {sum(1 for r in rows if r[5])} with a measured kernel median")
PY
}

case "$phase" in
  grade) grade_phase ;;
  ncu) ncu_phase ;;
  all) grade_phase; ncu_phase ;;
  *) echo "usage: $0 BINARY OUTDIR [grade|ncu|all]" >&2; exit 2 ;;
esac
summary | tee "$out/summary-$phase.txt"
# Only what the fit needs comes back: result.json files, ncu's CSVs, logs.
(cd "$out" && tar czf "estimate-bench-$phase.tgz" $(find grade ncu -name '*.json' -o -name '*.csv' -o -name '*.log' -o -name 'check.txt' 2>/dev/null) machine.txt $( [ -f skipped.txt ] && echo skipped.txt) 2>/dev/null)
rm -rf "$out/cohorts" "$out/cache" "$out/locks"
ls -la "$out"
