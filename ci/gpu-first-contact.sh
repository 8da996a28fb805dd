#!/usr/bin/env bash
# First contact on a GPU machine (issue 18): a fresh HOME, no LD_LIBRARY_PATH, no CUGRADE_*
# variable, the release binary on PATH.
#   1. NVRTC from cugrade's own cache, loaded without LD_LIBRARY_PATH: the machine has no
#      network, so the cache is seeded from the CUDA toolkit's libnvrtc (what cugrade would
#      download from PyPI); `doctor` says where NVRTC came from (the system's loader wins
#      where ldconfig knows the toolkit: then the cache path is not what ran, and it says so);
#   2. `doctor --backend cuda` exits 0 with the GPU, NVRTC and the headers present;
#      `doctor --backend cuda --rubric matmul` needs cuBLAS too;
#   3. a correct vector-add starter: `check --backend cuda` exits 0, speed measured;
#   4. a Numba starter, untouched: exit 1, "not implemented yet" at reduction.py, nothing
#      compiled;
#   5. a correct kernel including <cooperative_groups.h> with the headers hidden
#      (CUGRADE_CUDA_INCLUDE pointing at an empty folder): exit 3 naming the header and the fix,
#      never a 0/100 compile error; with the headers: graded (exit 0).
# Usage: ci/gpu-first-contact.sh BINARY OUTDIR     (PASS/FAIL lines; exit 1 on any FAIL)
set -uo pipefail
bin=$(realpath "$1"); out=$(realpath -m "$2")
mkdir -p "$out"
home=$(mktemp -d); trap 'rm -rf "$home"' EXIT
mkdir -p "$home/bin"; ln -s "$bin" "$home/bin/cugrade"
bad=0
say() { echo "$1 $2" | tee -a "$out/summary.txt"; [ "$1" = PASS ] || bad=1; }
# Only HOME and PATH, as a student's shell would have.
run() { (cd "$1" && shift && env -i HOME="$home" PATH="$home/bin:/usr/local/bin:/usr/bin:/bin" "$@"); }

lib="$home/.cache/cugrade-nvrtc/nvidia/cu13/lib"
mkdir -p "$lib"
found=$(find /usr/local/cuda/ /usr/local/cuda-13*/ -name 'libnvrtc.so.13' 2>/dev/null | head -n 1)
if [ -n "$found" ]; then
  cp -L "$found" "$(dirname "$found")/libnvrtc-builtins.so.13.0" "$lib/"
else
  say FAIL "no libnvrtc.so.13 in the CUDA toolkit to seed the cache with"
fi
if ldconfig -p 2>/dev/null | grep -q 'libnvrtc.so.13'; then
  echo "note: ldconfig knows libnvrtc.so.13: the system's NVRTC is loaded, not the cache's" | tee -a "$out/summary.txt"
fi

run "$home" cugrade doctor --backend cuda > "$out/doctor.txt" 2>&1
code=$?
[ $code -eq 0 ] && grep -q '^ok   GPU 0' "$out/doctor.txt" && grep -q '^ok   NVRTC 13' "$out/doctor.txt" \
  && say PASS "doctor --backend cuda: exit 0 ($(grep '^ok   NVRTC' "$out/doctor.txt"))" \
  || say FAIL "doctor --backend cuda: exit $code (see $out/doctor.txt)"
run "$home" cugrade init matmul mm > /dev/null
run "$home/mm" cugrade doctor --backend cuda > "$out/doctor-matmul.txt" 2>&1
code=$?
grep -q 'cuBLAS' "$out/doctor-matmul.txt" && { [ $code -eq 0 ] || grep -q '^MISS cuBLAS' "$out/doctor-matmul.txt"; } \
  && say PASS "doctor for matmul on cuda: exit $code, cuBLAS $(grep -o '^\(ok  \|MISS\) cuBLAS' "$out/doctor-matmul.txt")" \
  || say FAIL "doctor for matmul: exit $code (see $out/doctor-matmul.txt)"

run "$home" cugrade init vector-add va > /dev/null
python3 - "$home/va/vector-add.cu" <<'PY'
import sys; p = sys.argv[1]; s = open(p).read()
s = s.replace("{\n    // TODO: your code here.\n}", "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}")
open(p, "w").write(s)
PY
run "$home/va" cugrade check --backend cuda --json "$out/va.json" > "$out/va.txt" 2>&1
code=$?
[ $code -eq 0 ] && python3 -c "import json,sys;r=json.load(open(sys.argv[1]));assert r['run']['timed']" "$out/va.json" 2>/dev/null \
  && say PASS "vector-add, no LD_LIBRARY_PATH: exit 0, speed measured" \
  || say FAIL "vector-add: exit $code (see $out/va.txt)"

run "$home" cugrade init reduction nr --lang numba > /dev/null
run "$home/nr" cugrade check --backend cuda > "$out/numba-starter.txt" 2>&1
code=$?
[ $code -eq 1 ] && [ "$(grep -c 'not implemented yet' "$out/numba-starter.txt")" = 3 ] && grep -q 'reduction.py:' "$out/numba-starter.txt" \
  && say PASS "Numba starter: exit 1, three milestones not implemented yet at reduction.py" \
  || say FAIL "Numba starter: exit $code (see $out/numba-starter.txt)"

mkdir -p "$home/cg" "$home/empty"
echo "rubric: vector-add" > "$home/cg/cugrade.yaml"
cat > "$home/cg/vadd.cu" <<'CU'
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + cg::this_thread_block().thread_rank();
    if (i < n) c[i] = a[i] + b[i];
}
CU
(cd "$home/cg" && env -i HOME="$home" PATH="$home/bin:/usr/local/bin:/usr/bin:/bin" CUGRADE_CUDA_INCLUDE="$home/empty" \
  cugrade check --backend cuda) > "$out/headers-hidden.txt" 2>&1
code=$?
[ $code -eq 3 ] && grep -q 'cooperative_groups.h' "$out/headers-hidden.txt" && grep -q 'doctor --install' "$out/headers-hidden.txt" \
  && say PASS "headers hidden: exit 3 naming cooperative_groups.h and the fix" \
  || say FAIL "headers hidden: exit $code (see $out/headers-hidden.txt)"
run "$home/cg" cugrade check --backend cuda > "$out/headers.txt" 2>&1
code=$?
[ $code -eq 0 ] && say PASS "with the toolkit's headers: the same kernel passes" \
  || say FAIL "with the headers: exit $code (see $out/headers.txt)"
exit $bad
