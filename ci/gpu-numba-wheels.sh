#!/usr/bin/env bash
# Prepare the Numba toolchain for a GPU machine without network (the device tool's), for
# ci/gpu-numba.sh. The wheels come to ~90 MB, more than one carry (64 MiB with the tree), so
# they are split in two folders that travel in two calls to the same warm machine:
#
#   ci/gpu-numba-wheels.sh 3.12          # here, with network: fills .whl/part1 and .whl/part2
#   run: bash ci/gpu-numba.sh --unpack .whl/part1                     carry: [.whl/part1]
#   run: bash ci/gpu-numba.sh BINARY OUT --unpack .whl/part2          carry: [.whl/part2, BINARY's dir]
#
# (the second call within the machine's idle window: its home directory keeps the first
# part). part1 holds llvmlite (60 MB as a wheel) recompressed with xz; part2 the rest. NVVM,
# libdevice and NVRTC are not carried: ci/gpu-numba.sh copies them from the machine's CUDA 13.0
# toolkit. The pins are src/compile/toolchain.rs's NUMBA_WHEELS and HEADER_WHEELS.
set -euo pipefail
py="${1:?usage: ci/gpu-numba-wheels.sh PYTHON_VERSION, the GPU machine python3 version, e.g. 3.12}"
cd "$(dirname "$0")/.."
dl() {
  python3 -m pip download --quiet --only-binary=:all: --python-version "$py" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 "$@"
}
rm -rf .whl/part1 .whl/part2 .whl/all
mkdir -p .whl/part1 .whl/part2 .whl/all
dl -d .whl/all "numba-cuda==0.30.4" "numpy>=1.22,<2.5"
dl --no-deps -d .whl/all "nvidia-cuda-crt==13.0.88" "nvidia-cuda-runtime==13.0.88" "nvidia-cuda-cccl==13.0.85"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && unzip -q "$OLDPWD"/.whl/all/llvmlite-*.whl)
tar cf - -C "$tmp" . | xz -T0 -6 > .whl/part1/llvmlite.tar.xz
find .whl/all -name '*.whl' ! -name 'llvmlite-*' -exec mv {} .whl/part2/ \;
rm -rf .whl/all
du -sh .whl/part1 .whl/part2
