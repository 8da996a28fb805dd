#!/usr/bin/env bash
# The full GPU validation run (docs/validation/): validate every rubric, grade every example,
# run the gated GPU tests, the emulator/GPU differential test and CUDA inside the sandbox.
# Expects prebuilt binaries in .gpu/: cugrade and it (the integration-test binary,
# target/release/deps/it-* after `cargo test --release --locked --test it --no-run`).
# Usage: ci/gpu-final.sh OUTDIR [grade|tests|all]: `grade` validates rubrics and grades the
# examples, `tests` runs the test binaries; each fits one device call. The examples' verdicts
# are checked against their expected.yaml afterwards, on any machine:
#   CUGRADE_GPU_TESTS=1 CUGRADE_GPU_RESULTS=<run>/examples cargo test --test it gpu::lab_examples
set -uo pipefail
out="$1"; phase="${2:-all}"
mkdir -p /work && [ -e /work/main ] || ln -s "$PWD" /work/main
cd /work/main
for d in $(dirname "$(find / -xdev -name 'libnvrtc.so.13' 2>/dev/null | head -1)"); do export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
export CUGRADE_BIN=/work/main/.gpu/cugrade CUGRADE_ROOT=/work/main CUGRADE_GPU_TESTS=1
mkdir -p "$out/run"
if [ "$phase" != tests ]; then
for r in rubrics/*.yaml; do echo "### validate $r"; timeout 150 .gpu/cugrade validate --backend cuda "$r"; echo "exit=$?"; done > "$out/run/validate.log" 2>&1
bash ci/gpu-run.sh .gpu/cugrade "$out/run/examples" > /dev/null 2>&1
grep -E "^###|exit=|  [a-z_0-9]+ +(pass|fail|error|skipped) " "$out/run/validate.log"
grep -E "exit=" "$out/run/examples/gpu-run.log"
fi
if [ "$phase" != grade ]; then
timeout 280 .gpu/it gpu:: --nocapture --test-threads 1 --skip lab_examples_on_the_gpu > "$out/run/gpu-tests.log" 2>&1; echo "gpu-tests exit=$?" >> "$out/run/gpu-tests.log"
timeout 150 .gpu/it emu_corpus::corpus_differential_against_the_gpu --nocapture > "$out/run/differential.log" 2>&1; echo "differential exit=$?" >> "$out/run/differential.log"
timeout 90 .gpu/it sandbox_attacks::cuda_works_inside_the_sandbox --nocapture > "$out/run/sandbox-cuda.log" 2>&1; echo "sandbox exit=$?" >> "$out/run/sandbox-cuda.log"
tail -25 "$out/run/gpu-tests.log"; tail -8 "$out/run/differential.log"; tail -5 "$out/run/sandbox-cuda.log"
fi
tar czf "$out/run.tgz" -C "$out" run && rm -rf "$out/run"
