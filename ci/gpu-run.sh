#!/usr/bin/env bash
# Run cugrade on a GPU machine: doctor, then every example submission of every lab with
# --backend cuda, and `validate` on every rubric. Used for the H200 runs whose logs live in
# docs/validation/. Usage: ci/gpu-run.sh BINARY OUTDIR [labs...]
set -uo pipefail
bin="$1"; out="$2"; shift 2
labs=("$@")
[ ${#labs[@]} -eq 0 ] && labs=($(ls rubrics | sed 's/\.yaml$//'))
# The CUDA toolkit's NVRTC and cuBLAS, wherever this image keeps them.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -name 'libnvrtc.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null) $(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
mkdir -p "$out"
{
  echo "# cugrade GPU run, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$bin" --version
  echo; echo "## doctor"; "$bin" doctor
} 2>&1 | tee "$out/gpu-run.log"
for lab in "${labs[@]}"; do
  echo; echo "## $lab" | tee -a "$out/gpu-run.log"
  if [ -d "submissions-example/$lab" ]; then
    for sub in submissions-example/"$lab"/*/; do
      name=$(basename "$sub")
      "$bin" check --backend cuda --seed 1 --rubric "rubrics/$lab.yaml" "$sub" --json "$out/$lab-$name.json" >"$out/$lab-$name.txt" 2>&1
      code=$?
      printf '%-28s exit=%s %s\n' "$name" "$code" "$(python3 -c "import json,sys;r=json.load(open('$out/$lab-$name.json'));print(' '.join(m['id']+'='+m['status'] for m in r['milestones']), r['score'],'/',r['max_score'])" 2>/dev/null || tail -1 "$out/$lab-$name.txt")" | tee -a "$out/gpu-run.log"
    done
  fi
done
exit 0
