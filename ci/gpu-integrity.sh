#!/usr/bin/env bash
# GPU validation of issue 19 (docs/integrity.md, "Cheats cugrade catches on the GPU"): grades
# every cheat of tests/cheats/ and honest counterparts with `--backend cuda` and checks each
# verdict. The cheats' expectations are the `cuda` half of their expected.json (the emulator
# half is checked by `cargo test --test it cheats::`, with the same rules); the honest ones are below.
#   - precision_sgemm / precision_everywhere: "results less precise than float accumulation
#     allows" (cause `imprecise`) on the timed launches / the correctness cases;
#   - timer_transpose / latency_transpose: the metric checks read the GPU's counters (Nsight
#     Compute), so the naive path the GPU runs is graded; the emulator's counters disagree;
#   - timer_reduction: compute-sanitizer's racecheck (or the emulator's) fails the warp-synchronous
#     path the GPU takes;
#   - unwritten_nan: "left its output unwritten on a repeated launch" (no worker-protocol error);
#   - honest kernels (the examples, and the float path of the SGEMM cheat) keep their points:
#     correct, every timed launch verified ("timed launches on fresh inputs, each checked": the
#     speed itself is the rubric's business), metrics passing on Nsight Compute's counters,
#     compute-sanitizer clean, no imprecise/unwritten verdict, no emulator/GPU disagreement.
# Needs the prebuilt release binary (no Rust here), python3, and for the metric and sanitizer
# expectations ncu and compute-sanitizer (found on PATH or in the usual CUDA places; without
# them the lines say which expectation could not hold). Prints one PASS/FAIL line per
# expectation and a last line `gpu-integrity: N passed, M failed`; exit 1 on any FAIL.
# Budget: about 8 minutes on an H100: one `cugrade grade --jobs 3` per rubric, each with a
# timeout; a rubric whose grade would start past GPU_INTEGRITY_BUDGET_S (450) is reported as
# FAIL "not graded". The per-student results are under OUTDIR/graded/<rubric>/.
# Usage: ci/gpu-integrity.sh BINARY OUTDIR
set -uo pipefail
bin="${1:?usage: ci/gpu-integrity.sh BINARY OUTDIR}"; out="${2:?usage: ci/gpu-integrity.sh BINARY OUTDIR}"
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)" 2>/dev/null) \
  $(dirname "$(find / -xdev -name 'libcublas.so.13' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
for d in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer /opt/nvidia/nsight-compute/*/ /usr/local/NVIDIA-Nsight-Compute*/; do
  [ -d "$d" ] && export PATH="$d:$PATH"
done
{
  echo "# ci/gpu-integrity.sh, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  "$bin" --version 2>&1
  echo "ncu: $(command -v ncu || echo none); compute-sanitizer: $(command -v compute-sanitizer || echo none)"
} | tee "$out/machine.txt"
start=$(date +%s)
budget=${GPU_INTEGRITY_BUDGET_S:-450}

# The honest counterparts: NAME RUBRIC SUBMISSION-DIR and their expectations (same rules as
# the cheats' expected.json; `none` lists checks that must not exist, `all` a rule every check
# of the milestone's given kind must meet).
honest="$out/honest"; rm -rf "$honest"; mkdir -p "$honest/sgemm_float"
sed 's/bool half_mode = K >= 1024;/bool half_mode = false;/' tests/cheats/precision_sgemm/matmul.cu > "$honest/sgemm_float/matmul.cu"
grep -q 'half_mode = false;' "$honest/sgemm_float/matmul.cu" || echo "FAIL setup: could not make the float SGEMM from tests/cheats/precision_sgemm"
cat > "$honest/specs.json" <<'EOF'
{
  "sgemm_float": {"rubric": "matmul", "dir": "HONEST/sgemm_float", "cuda": {
    "expect": [
      {"milestone": "matmul_naive", "score": 30},
      {"milestone": "matmul_tiled", "kind": "correctness", "status": "pass"},
      {"milestone": "matmul_tiled", "kind": "performance", "message": "timed launches on fresh inputs, each checked"}
    ],
    "none": [{"milestone": "matmul_tiled", "cause": "imprecise"}, {"milestone": "matmul_tiled", "cause": "unwritten"}],
    "flags_absent": ["backends-disagree", "reads-timer"]}},
  "matmul_register_tiled": {"rubric": "matmul", "dir": "submissions-example/matmul/register_tiled", "cuda": {
    "expect": [
      {"milestone": "matmul_naive", "score": 30},
      {"milestone": "matmul_tiled", "kind": "correctness", "status": "pass"},
      {"milestone": "matmul_tiled", "kind": "performance", "message": "timed launches on fresh inputs, each checked"}
    ],
    "none": [{"milestone": "matmul_tiled", "cause": "imprecise"}, {"milestone": "matmul_tiled", "cause": "unwritten"}],
    "flags_absent": ["backends-disagree"]}},
  "transpose_tiled": {"rubric": "transpose", "dir": "submissions-example/transpose/tiled", "cuda": {
    "expect": [
      {"milestone": "transpose_coalesced", "kind": "correctness", "status": "pass"},
      {"milestone": "transpose_coalesced", "kind": "metric", "name": "global_store_efficiency",
       "status": "pass", "message": "on the GPU (Nsight Compute)"}
    ],
    "all": [{"milestone": "transpose_coalesced", "kind": "metric", "status": "pass", "message": "on the GPU (Nsight Compute)"}],
    "flags_absent": ["backends-disagree", "reads-timer"]}},
  "reduction_optimized": {"rubric": "reduction", "dir": "submissions-example/reduction/optimized", "cuda": {
    "expect": [
      {"milestone": "reduce_shared", "kind": "sanitizer", "name": "sanitizer (GPU)", "status": "pass",
       "message": "compute-sanitizer"},
      {"milestone": "reduce_shared", "kind": "correctness", "status": "pass"}
    ],
    "all": [{"milestone": "reduce_shared", "kind": "sanitizer", "status": "pass"}],
    "flags_absent": ["backends-disagree"]}},
  "vector_add_naive": {"rubric": "vector-add", "dir": "submissions-example/vector-add/naive", "cuda": {
    "expect": [
      {"milestone": "vector_add", "kind": "correctness", "status": "pass"},
      {"milestone": "vector_add", "kind": "performance", "message": "timed launches on fresh inputs, each checked"}
    ],
    "none": [{"milestone": "vector_add", "cause": "unwritten"}],
    "flags_absent": ["backends-disagree"]}}
}
EOF
sed -i "s#HONEST#$honest#" "$honest/specs.json"

# judge NAME JSON LOG SPECFILE KEY: check result JSON against SPECFILE's KEY (or the whole file
# when KEY is empty) `cuda` expectations, one PASS/FAIL line each.
judge() {
  local name="$1" json="$2" log="$3" spec="$4" key="$5"
  python3 - "$json" "$spec" "$key" "$name" "$log" <<'PYEOF'
import json, sys
path, spec_path, key, name, log = sys.argv[1:6]
spec = json.load(open(spec_path))
if key:
    spec = spec[key]
want = spec["cuda"]
try:
    r = json.load(open(path))
except Exception as e:
    tail = open(log, errors="replace").read()[-300:].replace("\n", " | ")
    print(f"FAIL {name}: no result.json ({e}): {tail}")
    sys.exit(0)
if r.get("backend") != "cuda":
    print(f"FAIL {name}: graded on {r.get('backend')}, not on the GPU")
    sys.exit(0)
ms = {m["id"]: m for m in r.get("milestones", [])}

def matches(c, w):
    for k in ("kind", "status", "cause"):
        if k in w and c.get(k) != w[k]:
            return False
    if "name" in w and not str(c.get("name", "")).startswith(w["name"]):
        return False
    if "message" in w and w["message"] not in str(c.get("message", "")):
        return False
    if "points" in w and c.get("points") != float(w["points"]):
        return False
    return True

def short(checks):
    return "; ".join(f"{c.get('kind')}/{c.get('name')}={c.get('status')}"
                     f"{'(' + c['cause'] + ')' if c.get('cause') else ''}: {str(c.get('message', ''))[:110]}"
                     for c in checks)

def line(ok, what, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {what}" + ("" if ok or not detail else f" -- {detail}"))

for w in want.get("expect", []):
    mid = w["milestone"]
    m = ms.get(mid)
    if m is None:
        line(False, f"{mid} exists", "no such milestone")
        continue
    rule = {k: v for k, v in w.items() if k not in ("milestone", "score")}
    if "kind" in w:
        same = [c for c in m["checks"] if c.get("kind") == w["kind"]] or m["checks"]
        line(any(matches(c, rule) for c in m["checks"]), f"{mid} has a check {json.dumps(rule)}", short(same))
    if "score" in w:
        line(m.get("score") == float(w["score"]), f"{mid} scores {w['score']}", f"score {m.get('score')}: {short(m['checks'])}")
for w in want.get("none", []):
    m = ms.get(w["milestone"], {"checks": []})
    rule = {k: v for k, v in w.items() if k != "milestone"}
    bad = [c for c in m["checks"] if matches(c, rule)]
    line(not bad, f"{w['milestone']} has no check {json.dumps(rule)}", short(bad))
for w in want.get("all", []):
    m = ms.get(w["milestone"], {"checks": []})
    of = [c for c in m["checks"] if c.get("kind") == w["kind"]]
    rule = {k: v for k, v in w.items() if k != "milestone"}
    bad = [c for c in of if not matches(c, rule)]
    line(bool(of) and not bad, f"{w['milestone']}: every {w['kind']} check is {json.dumps(rule)}", short(bad) if bad else f"no {w['kind']} check")
flags = [f.get("kind") for f in r.get("flags", [])]
for f in want.get("flags", []):
    line(f in flags, f"flag {f}", f"flags: {flags}")
for f in want.get("flags_absent", []):
    line(f not in flags, f"no flag {f}", "; ".join(x.get("message", "")[:160] for x in r.get("flags", []) if x.get("kind") == f))
PYEOF
}

# One cohort per rubric (the cheats and their honest counterparts), graded with
# `cugrade grade --jobs 3`: the references and cuBLAS are measured once per rubric and the
# emulator's and the profilers' work overlaps, which keeps the whole run within the budget.
# ENTRY lines: NAME RUBRIC DIR SPECFILE KEY.
cohorts="$out/cohorts"; rm -rf "$cohorts" "$out/graded"; mkdir -p "$cohorts"
entries="$out/entries.txt"; : > "$entries"
for d in tests/cheats/*/; do
  n=$(basename "$d")
  rubric=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['rubric'])" "$d/expected.json")
  echo "cheat-$n $rubric $d $d/expected.json -" >> "$entries"
done
for n in sgemm_float matmul_register_tiled transpose_tiled reduction_optimized vector_add_naive; do
  read -r rubric dir < <(python3 -c "import json,sys;s=json.load(open(sys.argv[1]))[sys.argv[2]];print(s['rubric'],s['dir'])" "$honest/specs.json" "$n")
  echo "honest-$n $rubric $dir $honest/specs.json $n" >> "$entries"
done
while read -r name rubric dir spec key; do
  mkdir -p "$cohorts/$rubric" && cp -r "$dir" "$cohorts/$rubric/$name"
done < "$entries"
{
  for rubric in $(cut -d' ' -f2 "$entries" | sort -u); do
    now=$(date +%s)
    if [ $((now - start)) -gt "$budget" ]; then
      echo "FAIL $rubric: not graded (past the ${budget}s budget after $((now - start))s)"
      continue
    fi
    left=$(( budget + 60 - (now - start) )); [ "$left" -gt 300 ] && left=300
    NO_COLOR=1 timeout "$left" "$bin" grade --backend cuda --seed 1 --jobs 3 --rubric "rubrics/$rubric.yaml" \
      --out "$out/graded/$rubric" "$cohorts/$rubric" > "$out/grade-$rubric.log" 2>&1
    echo "exit=$? seconds=$(( $(date +%s) - now ))" >> "$out/grade-$rubric.log"
    echo "# graded $rubric: $(tail -1 "$out/grade-$rubric.log")"
    while read -r name r dir spec key; do
      [ "$r" = "$rubric" ] || continue
      [ "$key" = "-" ] && key=""
      json=$(find "$out/graded/$rubric" -path "*/$name/result.json" 2>/dev/null | head -1)
      judge "$name" "${json:-$out/graded/$rubric/$name/result.json}" "$out/grade-$rubric.log" "$spec" "$key"
    done < "$entries"
  done
} 2>&1 | tee "$out/verdicts.txt"
pass=$(grep -c '^PASS ' "$out/verdicts.txt"); failed=$(grep -c '^FAIL ' "$out/verdicts.txt")
echo "gpu-integrity: $pass passed, $failed failed ($(( $(date +%s) - start ))s)" | tee -a "$out/verdicts.txt"
[ "$failed" -eq 0 ]
