#!/usr/bin/env bash
# The student path on a GPU machine (what the GPU CI templates run), with a prebuilt binary:
#   1. `cugrade init vector-add`, a correct kernel written in, `check --backend cuda` passes
#      (exit 0) with speed measured, and `--format github` prints no ::error;
#   2. `cugrade init reduction` with only reduce_naive written: exit 1, reduce_naive passes,
#      the other two milestones are "not implemented yet" (one check each, nothing compiled for
#      them), and the JUnit file says so;
#   3. the untouched starter: exit 1, nothing compiled, one line per milestone.
# Usage: ci/gpu-student.sh BINARY OUTDIR       (prints PASS/FAIL lines; exit 1 on any FAIL)
set -uo pipefail
bin=$(realpath "$1"); out="$2"
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -name 'libnvrtc.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
bad=0
say() { echo "$1 $2"; [ "$1" = PASS ] || bad=1; }

"$bin" init vector-add "$work/va" >/dev/null
python3 - "$work/va/vector-add.cu" <<'PY'
import sys; p = sys.argv[1]; s = open(p).read()
s = s.replace("{\n    // TODO: your code here.\n}", "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}")
open(p, "w").write(s)
PY
(cd "$work/va" && "$bin" check --backend cuda --format github --json "$out/va.json") > "$out/va.txt" 2>&1
code=$?
[ $code -eq 0 ] && ! grep -q '^::error' "$out/va.txt" && say PASS "vector-add starter, correct kernel: exit 0 on cuda" || say FAIL "vector-add starter: exit $code (see $out/va.txt)"
python3 -c "import json;r=json.load(open('$out/va.json'));assert r['backend']=='cuda' and r['run']['timed'], r['run']" 2>/dev/null \
  && say PASS "vector-add: speed measured" || say FAIL "vector-add: not timed on cuda"

"$bin" init reduction "$work/red" >/dev/null
(cd "$work/red" && "$bin" check --backend cuda --quiet) > "$out/untouched.txt" 2>&1
code=$?
[ $code -eq 1 ] && grep -q "Total: 0 / 100" "$out/untouched.txt" && say PASS "untouched starter: exit 1, 0 / 100" || say FAIL "untouched starter: exit $code"
python3 - "$work/red/reduction.cu" <<'PY'
import sys; p = sys.argv[1]; s = open(p).read()
stub = "void reduce_naive(const float* in, float* out, int n)\n{\n    // TODO: your code here.\n}"
s = s.replace(stub, "void reduce_naive(const float* in, float* out, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) atomicAdd(out, in[i]);\n}")
open(p, "w").write(s)
PY
(cd "$work/red" && "$bin" check --backend cuda --json "$out/red.json" --junit "$out/red-junit.xml") > "$out/red.txt" 2>&1
code=$?
python3 - "$out/red.json" <<'PY' && say PASS "half-done reduction: naive passes, the rest not implemented yet" || say FAIL "half-done reduction (exit $code, see $out/red.txt)"
import json, sys
r = json.load(open(sys.argv[1]))
st = {m["id"]: m for m in r["milestones"]}
assert st["reduce_naive"]["status"] == "pass", st["reduce_naive"]
for k in ("reduce_shared", "reduce_shuffle"):
    c = st[k]["checks"]
    assert len(c) == 1 and "not implemented yet" in c[0]["message"], c
PY
[ $code -eq 1 ] || say FAIL "half-done reduction: exit $code, expected 1"
exit $bad
