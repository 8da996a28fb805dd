#!/usr/bin/env bash
# Grade every example submission on the emulator and compare its correctness verdicts, check by
# check, with a GPU run's result.json files (ci/gpu-run.sh). Prints a Markdown table.
# Usage: ci/emu-vs-gpu.sh CUGRADE_BINARY GPU_EXAMPLES_DIR
set -uo pipefail
bin="$1"; gpu="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for lab in $(ls submissions-example); do
  for sub in submissions-example/"$lab"/*/; do
    name=$(basename "$sub")
    "$bin" check --backend emu --seed 1 --rubric "rubrics/$lab.yaml" "$sub" --json "$tmp/$lab-$name.json" >/dev/null 2>&1
  done
done
python3 - "$gpu" "$tmp" <<'PY'
import json, os, sys
gpu, emu = sys.argv[1], sys.argv[2]
KINDS = {"correctness", "memory", "sanitizer", "runtime", "compile", "kernel"}
def verdicts(path):
    r = json.load(open(path))
    out = {}
    for m in r["milestones"]:
        for c in m["checks"]:
            if c["kind"] == "correctness" or c["kind"] == "runtime" or c["kind"] == "compile":
                out[(m["id"], c["name"])] = c["status"]
        out[(m["id"], "only")] = ", ".join(sorted({c["name"] for c in m["checks"]
            if c["kind"] in ("sanitizer", "memory") and c["status"] in ("fail", "error")}))
        out[(m["id"], "*")] = "fail" if any(
            c["status"] in ("fail", "error") and c["kind"] in KINDS for c in m["checks"]) else "ok"
    return out
rows, same, diff = [], 0, 0
for f in sorted(os.listdir(emu)):
    g = os.path.join(gpu, f)
    if not os.path.exists(g):
        rows.append(f"| {f[:-5]} | (no GPU result) | | |"); diff += 1; continue
    e, gv = verdicts(os.path.join(emu, f)), verdicts(g)
    for key in sorted(set(e) | set(gv)):
        if key[1] != "*":
            continue
        a, b = e.get(key), gv.get(key)
        mismatched = [k[1] for k in sorted(set(e) | set(gv)) if k[0] == key[0] and k[1] not in ("*", "only") and e.get(k) != gv.get(k)]
        ok = a == b and not mismatched
        same += ok; diff += not ok
        rows.append(f"| {f[:-5]} | {key[0]} | emu {a}, GPU {b} | {'same' if ok else 'DIFFERENT: ' + (', '.join(mismatched) or 'found by ' + (e.get((key[0], 'only')) or '?') + ' on the emulator')} |")
print("| example | milestone | correctness (all non-speed checks) | verdict |")
print("| --- | --- | --- | --- |")
print("\n".join(rows))
print(f"\n{same} milestones agree, {diff} differ.")
PY
