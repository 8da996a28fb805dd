#!/usr/bin/env bash
# Grade a cohort through a REAL Slurm: a single-node slurmctld + slurmd (Debian's slurm-wlm,
# authenticated by munge), started here and stopped on exit, runs ci/slurm/submit.sh's job
# array on the emulator backend and its dependent merge job. The merged tree must equal an
# unsharded `cugrade grade` of the same cohort with the same seed, timings redacted.
#
#   ci/slurm-test.sh CUGRADE_BINARY RUBRIC COHORT [SHARDS]
#
# Needs root (slurmd runs jobs as the submitting user; munged's key is root's). Installs
# slurm-wlm and munge with apt when they are missing. Called from .ci/run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cugrade=$(realpath "$1"); rubric=$(realpath "$2"); cohort=$(realpath "$3"); shards=${4:-3}

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >/dev/null
fi

work=$(mktemp -d /tmp/cugrade-slurm.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  local code=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ "$code" -ne 0 ]; then
    echo "--- slurm logs ($work) ---" >&2
    tail -n 30 "$work"/slurmctld.log "$work"/slurmd.log "$work"/out/*.log 2>/dev/null >&2 || true
  else
    rm -rf "$work"
  fi
  exit "$code"
}
trap cleanup EXIT

# munge: a private key, socket and state under $work so that nothing of the host's is used.
mkdir -p "$work/munge"/{etc,run,lib,log}
chmod 700 "$work/munge/etc" "$work/munge/lib" "$work/munge/log"
dd if=/dev/urandom of="$work/munge/etc/munge.key" bs=128 count=1 status=none
chmod 400 "$work/munge/etc/munge.key"
sock="$work/munge/run/munge.socket"
munged --force --key-file="$work/munge/etc/munge.key" --socket="$sock" \
  --pid-file="$work/munge/run/munged.pid" --log-file="$work/munge/log/munged.log" \
  --seed-file="$work/munge/lib/munged.seed"
for _ in $(seq 50); do [ -f "$work/munge/run/munged.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$work/munge/run/munged.pid")")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
mkdir -p "$work/state" "$work/spool" "$work/out"
cat > "$work/slurm.conf" <<CONF
ClusterName=cugrade-ci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$work/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 & pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$work/slurmd.out" 2>&1 & pids+=($!)
for _ in $(seq 60); do
  if sinfo -h -o '%T' 2>/dev/null | grep -E '^(idle|mixed|allocated)' >/dev/null; then break; fi
  sleep 1
done
sinfo -h -o '%T' | grep -E '^(idle|mixed|allocated)' >/dev/null || { echo "slurm-test: the node never came up" >&2; sinfo >&2 || true; exit 1; }
echo "slurm-test: slurmctld + slurmd up on $host ($(sinfo -V))"

seed=4242
out="$work/out"
"$here/slurm/submit.sh" --rubric "$rubric" --cohort "$cohort" --out "$out" --shards "$shards" \
  --seed "$seed" --backend emu --cugrade "$cugrade" | tee "$work/submit.txt"
merge_job=$(sed -n 's/.*merge job \([0-9]*\).*/\1/p' "$work/submit.txt")
deadline=$((SECONDS + 600))
while squeue -h -j "$merge_job" 2>/dev/null | grep . >/dev/null; do
  [ $SECONDS -lt $deadline ] || { echo "slurm-test: jobs still queued after 10 minutes" >&2; squeue >&2; exit 1; }
  sleep 2
done
[ -f "$out/merged/grades.csv" ] || { echo "slurm-test: the merge job left no $out/merged/grades.csv" >&2; ls -R "$out" >&2; exit 1; }
for k in $(seq "$shards"); do [ -d "$out/shards/$k" ] || { echo "slurm-test: shard $k never ran" >&2; exit 1; }; done

set +e
"$cugrade" grade --rubric "$rubric" "$cohort" --out "$work/unsharded" --seed "$seed" --backend emu >/dev/null 2>&1
code=$?
set -e
[ "$code" -le 1 ] || { echo "slurm-test: the unsharded run failed with exit $code" >&2; exit 1; }

# Timings (check seconds, run.phases' *_s, junit times and timestamps, ptxas's "Compile time" in compile logs)
# differ from run to run; everything else must be identical.
redact() {
  (cd "$1" && find . -type f -not -name cpu-baselines.json | LC_ALL=C sort | while read -r f; do
     printf '=== %s\n' "$f"
     sed -E -e 's/"(seconds|execution_time|[a-z_]+_s)": [0-9.e+-]+/"\1": T/g' \
            -e 's/ time="[0-9.e+-]+"/ time="T"/g' -e 's/ timestamp="[^"]*"/ timestamp="T"/g' \
            -e 's/Compile time = [0-9.]+ ms/Compile time = T ms/g' "$f"
   done)
}
if ! diff <(redact "$work/unsharded") <(redact "$out/merged") >"$work/diff.txt"; then
  echo "slurm-test: the merged tree differs from the unsharded run:" >&2
  head -c 6000 "$work/diff.txt" >&2
  exit 1
fi
echo "slurm-test: $shards-shard Slurm array + merge == unsharded run ($(ls "$out/merged" | wc -l) entries)"
