#!/usr/bin/env bash
# How long each speed estimate takes (issue 21's target: at most 5 s per performance check on
# the 2-core machine): every CUDA C++ example of every lab graded on the emulator, one line per
# estimated check, slowest first.
#
#   ci/with-nvrtc ci/estimate-times.sh BIN
set -euo pipefail
bin=$(realpath "${1:?usage: ci/estimate-times.sh BIN}")
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $("$bin" --version)"
for d in $(find submissions-example -name expected.yaml | xargs -n1 dirname | grep -v -E 'numba|cupy' | sort); do
  lab=$(echo "$d" | cut -d/ -f2)
  "$bin" check --backend emu --rubric "rubrics/$lab.yaml" "$d" --json "$tmp/r.json" >/dev/null 2>&1 || true
  python3 - "$d" "$tmp/r.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[2]))
except (OSError, ValueError):
    sys.exit()
for m in r["milestones"]:
    for c in m["checks"]:
        e = c.get("estimate")
        if c.get("kind") == "performance" and e:
            print("%6.2f s  %-45s %-20s %s" % (e["seconds"], sys.argv[1].split("/", 1)[1], m["id"], c["name"]))
PY
done | sort -rn
