#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image
# (https://gradescope-autograders.readthedocs.io/en/latest/specs/). It installs cugrade and
# NVRTC; run_autograder then grades each submission. ci/gradescope/make-bundle.sh builds the
# zip that holds this file; see docs/gradescope.md.
#
# The bundle carries either a prebuilt binary (bin/cugrade, built on a glibc no newer than the
# image's, e.g. Ubuntu 22.04) or the cugrade source tree (cugrade/), built here with rustup.
set -euo pipefail
SRC=${AUTOGRADER_ROOT:-/autograder}/source
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq ca-certificates curl python3 python3-pip build-essential pkg-config >/dev/null

if [ ! -x "$SRC/bin/cugrade" ]; then
  if [ ! -d "$SRC/cugrade" ]; then
    echo "setup.sh: the bundle holds neither bin/cugrade nor the cugrade/ source tree" >&2
    exit 1
  fi
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
  (cd "$SRC/cugrade" && cargo build --release --locked)
  mkdir -p "$SRC/bin"
  cp "$SRC/cugrade/target/release/cugrade" "$SRC/bin/cugrade"
fi
install -m 755 "$SRC/bin/cugrade" /usr/local/bin/cugrade

# NVRTC from PyPI (NVIDIA's licence lets us download it, not ship it), as ci/with-nvrtc does.
python3 -m pip install --quiet --target /opt/cugrade-nvrtc nvidia-cuda-nvrtc==13.0.88
echo "/opt/cugrade-nvrtc/nvidia/cu13/lib" > /etc/ld.so.conf.d/cugrade-nvrtc.conf
ldconfig
# Everything each rubric needs (NVRTC, CUDA's headers, Numba where it accepts .py kernels,
# NumPy for a function lab), installed now into the image, and checked: `doctor` exits 3 when
# something is still missing, which fails the image's build here rather than every submission
# later.
for rubric in "$SRC"/rubrics/*.yaml; do
  cugrade doctor --install --rubric "$rubric"
done
