#!/usr/bin/env bash
# CuPy from cugrade's cache on a GPU machine whose interpreter has none (issue 22, item 4):
# what `cugrade` installs on first use (src/compile/arrays.rs's CUPY_WHEELS, verified to
# install from PyPI and import on a machine with network) is installed here from wheels
# carried in two parts (the device tool's machines have no network), stamped with the pins,
# and a function lab is graded with a Python that has neither NumPy nor CuPy of its own.
#   here:  split the cupy-cuda13x 14.0.1 cp312 wheel in two (.whl/cupy1, .whl/cupy2 with the
#          numpy, nvidia-cuda-runtime and cuda-pathfinder wheels)
#   run:   bash ci/gpu-cupy-cache.sh --part1                      carry: [.whl/cupy1]
#   run:   bash ci/gpu-cupy-cache.sh BINARY OUT PYTHON            carry: [.whl/cupy2, .gpu]
# The NVRTC wheel of the pins is not carried (90 MB): CuPy finds the machine's CUDA 13.0 NVRTC.
set -uo pipefail
stash="$HOME/cugrade-cupy-parts"
if [ "${1:-}" = --part1 ]; then
  mkdir -p "$stash" && cp .whl/cupy1/* "$stash/" && ls -la "$stash"
  exit
fi
bin=$(realpath "${1:?usage}")
out=$(realpath -m "${2:?usage}")
py="${3:-/usr/bin/python3.12}"
mkdir -p "$out"
cp .whl/cupy2/* "$stash/"
cat "$stash"/cupy.whl.part-* > "$stash/cupy_cuda13x-14.0.1-cp312-cp312-manylinux2014_x86_64.whl"
rm -f "$stash"/cupy.whl.part-*
cache="$out/cache"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
{
  echo "# ci/gpu-cupy-cache.sh, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "interpreter: $py: $("$py" -c 'import sys; print(sys.version.split()[0])' 2>&1)"
  "$py" -c 'import numpy' 2>&1 | tail -1
  "$py" -c 'import cupy' 2>&1 | tail -1
  python3 -m pip install --quiet --no-index --no-deps --target "$cache/cupy" "$stash"/*.whl 2>&1 | tail -3
  # The stamp cugrade writes after an install (the pins, in order; a unit test of
  # src/compile/arrays.rs checks this line against CUPY_WHEELS).
  printf '%s\n' "cupy-cuda13x==14.0.1 numpy>=2.0,<2.5 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.88" > "$cache/cupy/.cugrade-pins"
  echo "doctor:"
  CUGRADE_PYTHON="$py" CUGRADE_NVRTC_CACHE="$cache" "$bin" doctor --backend cuda --rubric rubrics/preprocess.yaml 2>&1 | grep -i "function labs"
  for ex in cupy_port float64_upcast; do
    echo "== $ex"
    CUGRADE_PYTHON="$py" CUGRADE_NVRTC_CACHE="$cache" "$bin" check --backend cuda --seed 1 \
      --rubric rubrics/preprocess.yaml "submissions-example/preprocess/$ex" --json "$out/$ex.json" 2>&1 | tail -12
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r[\"run\"][\"notes\"]); [print(c[\"name\"], c[\"status\"], c.get(\"seconds\"), c[\"message\"][:240]) for m in r[\"milestones\"] for c in m[\"checks\"]]" "$out/$ex.json"
  done
} >"$out/gpu-cupy-cache.log" 2>&1
rm -rf "$cache" "$stash"
cat "$out/gpu-cupy-cache.log"
