#!/usr/bin/env bash
# Build the Gradescope autograder zip for one rubric:
#
#   ci/gradescope/make-bundle.sh RUBRIC OUT.zip [--binary target/release/cugrade]
#
# The zip holds setup.sh and run_autograder at its root, the rubric in rubrics/ with the
# reference kernels it names (paths kept relative), and either the given prebuilt binary in
# bin/ or the cugrade source tree in cugrade/ (then setup.sh builds it). See docs/gradescope.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 RUBRIC OUT.zip [--binary PATH]" >&2; exit 2; }
rubric=$(realpath "$1"); out=$(realpath -m "$2"); shift 2
binary=""
if [ "${1:-}" = --binary ]; then binary=$(realpath "$2"); fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$here/setup.sh" "$here/run_autograder" "$stage/"
chmod +x "$stage/setup.sh" "$stage/run_autograder"
# The rubric names its reference kernel relative to itself (`reference: ../reference-kernels/x.cu`).
mkdir -p "$stage/rubrics"
cp "$rubric" "$stage/rubrics/"
# The course's pinned CPU baselines (`cugrade calibrate`): without them every student reads
# "no ratio: the CPU baseline is not pinned".
pins="${rubric%.*}.calibration.json"
[ -f "$pins" ] && cp "$pins" "$stage/rubrics/"
ref=$(sed -n 's/^reference:[[:space:]]*//p' "$rubric" | sed -n 1p | tr -d '"'"'")
if [ -n "$ref" ]; then
  src_ref=$(realpath "$(dirname "$rubric")/$ref")
  dst_ref=$(realpath -m "$stage/rubrics/$ref")
  case "$dst_ref" in "$stage"/*) ;; *) echo "make-bundle: reference $ref leaves the bundle" >&2; exit 2 ;; esac
  mkdir -p "$(dirname "$dst_ref")"
  cp "$src_ref" "$dst_ref"
fi
if [ -n "$binary" ]; then
  mkdir -p "$stage/bin"; cp "$binary" "$stage/bin/cugrade"
else
  mkdir -p "$stage/cugrade"
  (cd "$repo" && git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$stage/cugrade")
fi
rm -f "$out"
(cd "$stage" && python3 -m zipfile -c "$out" ./*)
echo "wrote $out"
