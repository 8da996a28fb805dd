#!/usr/bin/env bash
# Grade a cohort on a Slurm cluster: a job array of N shards (one GPU each), then a merge job
# that starts when every shard succeeded.
#
#   ci/slurm/submit.sh --rubric R --cohort DIR --out DIR [--shards N] [--seed S]
#                      [--backend cuda|emu|auto] [--gpus-per-task G] [-- extra sbatch options]
#
# --out must be on a file system every node sees. Prints the two job ids; the merged tree
# appears in OUT/merged. All shards use one seed (drawn here unless given), so the merged
# result equals `cugrade grade` run on the whole cohort with that seed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shards=4 seed="" backend=auto gpus=1 rubric="" cohort="" out=""
cugrade=${CUGRADE:-$(command -v cugrade || true)}
while [ $# -gt 0 ]; do
  case "$1" in
    --rubric) rubric=$2; shift 2 ;;
    --cohort) cohort=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --gpus-per-task) gpus=$2; shift 2 ;;
    --cugrade) cugrade=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "submit.sh: unknown option $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
if [ -z "$rubric" ] || [ -z "$cohort" ] || [ -z "$out" ]; then
  echo "submit.sh: --rubric, --cohort and --out are required" >&2; exit 2
fi
if [ -z "$cugrade" ] || [ ! -x "$cugrade" ]; then
  echo "submit.sh: no cugrade binary: put it on PATH or pass --cugrade PATH" >&2; exit 2
fi
case "$shards" in ''|*[!0-9]*|0) echo "submit.sh: --shards takes a positive integer" >&2; exit 2 ;; esac
[ -n "$seed" ] || seed=$(( (RANDOM << 15) | RANDOM ))
abs() { (cd "$(dirname "$1")" && printf '%s/%s' "$(pwd)" "$(basename "$1")"); }
mkdir -p "$out"
export CUGRADE=$(abs "$cugrade") CUGRADE_RUBRIC=$(abs "$rubric") CUGRADE_COHORT=$(abs "$cohort")
export CUGRADE_OUT=$(abs "$out") CUGRADE_SEED=$seed CUGRADE_BACKEND=$backend
gpu_opts=()
if [ "$backend" != emu ] && [ "$gpus" -gt 0 ]; then gpu_opts=(--gpus-per-task="$gpus"); fi
array=$(sbatch --parsable --export=ALL --chdir="$CUGRADE_OUT" --array="1-$shards" \
  "${gpu_opts[@]}" "$@" "$here/grade-array.sbatch")
array=${array%%;*}
merge=$(sbatch --parsable --export=ALL --chdir="$CUGRADE_OUT" --dependency="afterok:$array" \
  --kill-on-invalid-dep=yes "$@" "$here/merge.sbatch")
merge=${merge%%;*}
echo "grading array job $array ($shards shards, seed $seed), merge job $merge -> $CUGRADE_OUT/merged"
