#!/usr/bin/env bash
# Every output cugrade writes for every example submission (and, given one, a cohort), with the
# fields that vary from run to run redacted: two builds that grade alike leave identical trees.
# This is how a refactor is checked byte for byte (docs/validation/refactor-golden.md).
#
#   ci/golden.sh BIN OUT [COHORT] [BACKEND]
#
# BIN: the cugrade binary. OUT: a new folder. COHORT: a cohort folder to `grade` as well (the
# 50-student fixture: `CUGRADE_KEEP_COHORT=DIR cargo test --test it cohort::fifty` leaves it in
# DIR/cohort). BACKEND: emu (default) or cuda. Then `diff -r OUT_BEFORE OUT_AFTER`.
# GOLDEN_ONLY=REGEX grades only the examples whose name (lab_example) matches.
set -euo pipefail
bin=$(realpath "$1")
out=$2
cohort=${3:-}
backend=${4:-emu}
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(realpath "$out")

# Run-to-run variation: wall-clock and measured times, the version, temp paths; on a GPU
# (REDACT_MEASURED=1) every measured number too: ratios, medians, clocks (the points and the
# scores stay, so a verdict that moved shows).
redact() {
  python3 - "$@" <<'EOF'
import json, os, re, sys
TIMED = {"seconds", "wall_s", "elapsed_s", "duration_s", "execution_time"}
MEASURED = os.environ.get("REDACT_MEASURED") == "1"
KEEP = {"score", "max_score", "points", "threshold"}
def walk(v, key=None):
    if isinstance(v, dict):
        # `run.phases`: wall time by phase; older results have none.
        return {k: ("<t>" if k in TIMED and isinstance(x, (int, float)) else walk(x, k))
                for k, x in v.items() if k != "phases"}
    if MEASURED and isinstance(v, float) and key not in KEEP:
        return "<n>"
    if MEASURED and key in {"timing", "measured", "samples_ms"}:
        return "<measured>"
    if isinstance(v, list):
        return [walk(x) for x in v]
    if isinstance(v, str):
        return scrub(v)
    return v
def scrub(s):
    s = re.sub(r"/tmp/[A-Za-z0-9._/-]+", "<tmp>", s)
    s = re.sub(r"\b\d+(\.\d+)? ?(s|ms)\b", "<t>", s)
    if MEASURED:
        s = re.sub(r"\d+\.\d+(e[-+]?\d+)?", "<n>", s)
        s = re.sub(r"\b\d+ timed launches", "<n> timed launches", s)
    return s
for p in sys.argv[1:]:
    text = open(p, encoding="utf-8", errors="replace").read()
    if p.endswith(".json"):
        try:
            text = json.dumps(walk(json.loads(text)), indent=1, sort_keys=False) + "\n"
        except ValueError:
            text = scrub(text)
    else:
        text = re.sub(r'time="[0-9.]+"', 'time="<t>"', text)
        text = re.sub(r'timestamp="[^"]*"', 'timestamp="<t>"', text)
        text = scrub(text)
    open(p, "w", encoding="utf-8").write(text)
EOF
}

n=0
while IFS= read -r expected; do
  dir=$(dirname "$expected")
  lab=$(echo "$dir" | cut -d/ -f2)
  name=$(echo "${dir#submissions-example/}" | tr / _)
  if [ -n "${GOLDEN_ONLY:-}" ] && ! [[ $name =~ $GOLDEN_ONLY ]]; then
    continue
  fi
  o="$out/examples/$name"
  mkdir -p "$o"
  code=0
  COLUMNS=100 CI=1 "$bin" check --backend "$backend" --seed 1 --rubric "rubrics/$lab.yaml" "$dir" \
    --json "$o/result.json" --junit "$o/junit.xml" --markdown "$o/report.md" \
    --gradescope "$o/gradescope.json" >"$o/stdout.txt" 2>"$o/stderr.txt" || code=$?
  redact "$o"/*.json "$o"/*.xml "$o"/*.md "$o"/*.txt 2>/dev/null || true
  # Last: an example with its `exit` is complete.
  echo "$code" >"$o/exit"
  n=$((n + 1))
done < <(find submissions-example -name expected.yaml | sort)
echo "graded $n examples into $out/examples" >&2

if [ -n "$cohort" ]; then
  code=0
  CI=1 CUGRADE_ESTIMATE_GPU=none "$bin" grade --rubric tests/fixtures/cohort/reduction-small.yaml \
    "$cohort" --out "$out/cohort" --backend "$backend" --seed 11 --jobs 2 \
    >"$out/cohort.stdout" 2>"$out/cohort.stderr" || code=$?
  echo "$code" >"$out/cohort.exit"
  # Progress lines arrive in completion order, with the counts so far.
  sed -i -E 's/ \[[0-9]+\/[0-9]+, [^]]*\]$//' "$out/cohort.stderr"
  sort -o "$out/cohort.stderr" "$out/cohort.stderr"
  sed -i "s#$out#<out>#g" "$out/cohort.stdout"
  find "$out/cohort" -type f \( -name '*.json' -o -name '*.md' -o -name '*.xml' -o -name '*.csv' \
    -o -name '*.txt' \) -print0 | xargs -0 -r bash -c "$(declare -f redact); redact \"\$@\"" _
  redact "$out/cohort.stdout" "$out/cohort.stderr"
  echo "graded the cohort into $out/cohort" >&2
fi
