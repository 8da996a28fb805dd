#!/usr/bin/env bash
# GPU validation of issue 10 (docs/sanitizers.md, docs/profile.md): on `--backend cuda`,
#  1. the divergent-barrier and the race example submissions fail their sanitizer check (the
#     emulator's synccheck / racecheck, run after the GPU correctness cases), naming the tool;
#  2. a correct submission passes it;
#  3. `check --profile` runs Nsight Compute when `ncu` is on PATH and prints the explained
#     metric set (or, without ncu, says how to get it).
# Needs a prebuilt binary (no Rust on the GPU machine) and python3.
# Usage: ci/gpu-sanitizer.sh [BINARY] [OUTDIR]    (defaults: target/release/cugrade, gpu-sanitizer-out)
set -uo pipefail
bin="${1:-target/release/cugrade}"; out="${2:-gpu-sanitizer-out}"
mkdir -p "$out"
for d in /usr/local/cuda/lib64 $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
for d in /usr/local/cuda/bin /opt/nvidia/nsight-compute/*/ /usr/local/NVIDIA-Nsight-Compute*/; do
  [ -x "$d/ncu" ] && export PATH="$d:$PATH"
done
fail=0
# grade NAME EXPECT: EXPECT is "fail:<tool>" or "pass".
grade() {
  local name="$1" expect="$2" sub="submissions-example/reduction/$1"
  NO_COLOR=1 "$bin" check --backend cuda --seed 1 --rubric rubrics/reduction.yaml "$sub" \
    --json "$out/$name.json" --markdown "$out/$name.md" > "$out/$name.txt" 2>&1
  echo "exit=$?" >> "$out/$name.txt"
  python3 - "$out/$name.json" "$expect" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); expect = sys.argv[2]
assert r["backend"] == "cuda", "not graded on the GPU: " + r["backend"]
m = next(m for m in r["milestones"] if m["id"] == "reduce_shared")
san = [c for c in m["checks"] if c["kind"] == "sanitizer"]
assert san, "no sanitizer check on the cuda backend"
if expect == "pass":
    assert all(c["status"] == "pass" for c in san), san
    assert "PTX emulator" in san[0]["message"], san[0]["message"]
else:
    tool = expect.split(":")[1]
    bad = [c for c in san if c["status"] == "fail" and c.get("cause") == tool]
    assert bad, f"no failing {tool} check: {san}"
    assert bad[0].get("location", "").startswith("reduce.cu:"), bad[0]
    assert "PTX emulator" in bad[0]["message"], bad[0]["message"]
    assert m["status"] == "fail" and m["score"] == 0, (m["status"], m["score"])
print("ok:", sys.argv[1], expect, "|", san[0]["message"][:120])
EOF
  [ $? -eq 0 ] || { echo "FAILED: $name ($expect)"; fail=1; }
}
grade syncthreads_in_branch fail:synccheck
grade missing_syncthreads fail:racecheck
grade optimized pass

# --profile: Nsight Compute when present.
NO_COLOR=1 timeout 500 "$bin" check --backend cuda --seed 1 --profile --rubric rubrics/matmul.yaml \
  submissions-example/matmul/register_tiled > "$out/profile.txt" 2>&1
echo "exit=$?" >> "$out/profile.txt"
if command -v ncu >/dev/null; then
  echo "ncu: $(command -v ncu) ($(ncu --version | tail -1))"
  for m in achieved_occupancy dram_throughput global_load_efficiency shared_bank_conflicts warp_stalls; do
    grep -q "^  $m " "$out/profile.txt" || { echo "FAILED: --profile lacks $m"; fail=1; }
  done
else
  grep -q "Nsight Compute (ncu) is not on PATH" "$out/profile.txt" || { echo "FAILED: --profile without ncu says nothing"; fail=1; }
  echo "ncu not found: only the no-ncu message was checked"
fi
tail -20 "$out/profile.txt"
[ $fail -eq 0 ] && echo "gpu-sanitizer: all checks passed" || echo "gpu-sanitizer: FAILED"
exit $fail
