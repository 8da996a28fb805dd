#!/usr/bin/env bash
# Numba submissions and CUDA's headers on a GPU machine: installs the Numba toolchain and the
# header wheels into cugrade's cache from wheels carried in .whl/ (GPU machines have no
# network), then grades every Numba example (and the CUDA example that includes
# cooperative_groups.h and CUB) with --backend cuda, and checks each milestone against its
# expected.yaml (`gpu:` where given, else the emulator's verdict; a milestone that is
# `skipped` on the emulator only for want of timing must not fail on the GPU for a wrong
# answer). Speeds go to OUTDIR/gpu-numba.log for docs/validation/.
#
# Usage: ci/gpu-numba.sh BINARY OUTDIR [--unpack DIR]
#        ci/gpu-numba.sh --unpack DIR
# The GPU machine has no network: ci/gpu-numba-wheels.sh (run where there is one) prepares the
# wheels in two parts that travel in two calls (its header says how). `--unpack` installs a
# part into cugrade's cache: part 1 (llvmlite) first, part 2 (the rest) second. NVVM,
# libdevice and NVRTC come from the machine's CUDA 13.0 toolkit.
set -uo pipefail
unpack=""
if [ "${1:-}" = --unpack ]; then
  unpack="$2"; bin=""; out=""
else
  bin="$1"; out="$2"
  [ "${3:-}" = --unpack ] && unpack="$4"
fi
cache="${CUGRADE_NVRTC_CACHE:-$HOME/.cache/cugrade-nvrtc}"
# src/compile/toolchain.rs's NUMBA_WHEELS, as its pins stamp (a unit test checks they agree).
pins="numba-cuda==0.30.4 numpy>=1.22,<2.5 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.88 nvidia-cuda-nvrtc==13.0.88"
pip_here() {
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --no-index --no-deps --target "$@"
}
if [ -n "$unpack" ]; then
  if [ -f "$unpack/llvmlite.tar.xz" ]; then
    rm -rf "$cache/numba" && mkdir -p "$cache/numba"
    tar xJf "$unpack/llvmlite.tar.xz" -C "$cache/numba" || exit 1
    echo "gpu-numba: llvmlite unpacked into $cache/numba"
  fi
  if ls "$unpack"/numba_cuda-*.whl >/dev/null 2>&1; then
    [ -d "$cache/numba/llvmlite" ] || { echo "gpu-numba: unpack part 1 (llvmlite) first" >&2; exit 2; }
    pip_here "$cache/numba" $(ls "$unpack"/*.whl | grep -v nvidia_cuda_cccl) || exit 1
    pip_here "$cache/headers" "$unpack"/nvidia_cuda_runtime-*.whl "$unpack"/nvidia_cuda_cccl-*.whl || exit 1
    lib="$cache/numba/nvidia/cu13/lib"
    mkdir -p "$lib" "$cache/numba/nvidia/cu13/nvvm/libdevice"
    cp -L /usr/local/cuda/nvvm/lib64/libnvvm.so.4 /usr/local/cuda/lib64/libnvrtc.so.13 \
      /usr/local/cuda/lib64/libnvrtc-builtins.so.13.0 "$lib/" || exit 1
    cp -L /usr/local/cuda/nvvm/libdevice/libdevice.10.bc "$cache/numba/nvidia/cu13/nvvm/libdevice/" || exit 1
    echo "$pins" > "$cache/numba/.cugrade-pins"
    echo "gpu-numba: Numba installed in $cache/numba, CUDA headers in $cache/headers"
  fi
  [ -z "$bin" ] && exit 0
fi
mkdir -p "$out"
log="$out/gpu-numba.log"
{
  echo "# cugrade GPU run: Numba and CUDA headers, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 --version
  "$bin" --version
} 2>&1 | tee "$log"
if [ "$(cat "$cache/numba/.cugrade-pins" 2>/dev/null)" != "$pins" ]; then
  echo "gpu-numba: no Numba toolchain with this cugrade's pins in $cache/numba: see --unpack" | tee -a "$log"
  exit 2
fi
# NVRTC for the reference kernels: the toolkit's, or the wheel's from the Numba install.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib "$cache/nvidia/cu13/lib" "$cache/numba/nvidia/cu13/lib"; do
  if [ -f "$d/libnvrtc.so.13" ]; then
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    break
  fi
done
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -f "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
done
{ echo; echo "## doctor"; "$bin" doctor; } 2>&1 | tee -a "$log"

failures=0
for dir in submissions-example/*/numba_* submissions-example/reduction/cooperative_groups_cub; do
  [ -d "$dir" ] || continue
  lab=$(basename "$(dirname "$dir")"); name=$(basename "$dir")
  json="$out/$lab-$name.json"
  "$bin" check --backend cuda --seed 1 --rubric "rubrics/$lab.yaml" "$dir" --json "$json" \
    >"$out/$lab-$name.txt" 2>&1
  code=$?
  verdict=$(python3 - "$json" "$dir/expected.yaml" <<'PY'
import json, re, sys
result = json.load(open(sys.argv[1]))
# expected.yaml is flat YAML: read `milestones:` and `gpu:` maps without a YAML library.
want, section = {"milestones": {}, "gpu": {}}, None
for line in open(sys.argv[2]):
    line = line.split("#")[0].rstrip()
    if re.match(r"^\w", line):
        section = line.rstrip(":") if line.endswith(":") else None
    elif section in want and ":" in line:
        k, v = line.strip().split(":", 1)
        want[section][k.strip()] = v.strip()
bad, parts = [], []
for m in result["milestones"]:
    got = m["status"]
    speeds = [f'{c["name"]}={c.get("measured")}' for c in m["checks"] if c["kind"] == "performance"]
    parts.append(f'{m["id"]}={got}' + (f' ({", ".join(speeds)})' if speeds else ""))
    exp = want["gpu"].get(m["id"]) or want["milestones"].get(m["id"])
    if exp == "skipped":
        # Skipped on the emulator for want of timing: on the GPU the answers must be right.
        wrong = [c for c in m["checks"] if c["kind"] != "performance" and c["status"] != "pass"]
        if wrong:
            bad.append(f'{m["id"]}: {wrong[0]["name"]}: {wrong[0]["message"]}')
    elif exp and exp != got:
        bad.append(f'{m["id"]} is {got}, expected {exp}')
print(" ".join(parts), result["score"], "/", result["max_score"])
for b in bad:
    print("MISMATCH", b)
PY
)
  printf '%-18s %-28s exit=%s %s\n' "$lab" "$name" "$code" "$verdict" | tee -a "$log"
  if [ -z "$verdict" ] || grep -q MISMATCH <<<"$verdict"; then
    failures=$((failures + 1))
  fi
done
echo "numba/header examples with unexpected verdicts: $failures" | tee -a "$log"
[ "$failures" -eq 0 ]
