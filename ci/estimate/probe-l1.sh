#!/usr/bin/env bash
# Run ci/estimate/probe_l1.py on a GPU, plain (timings) and under Nsight Compute (counters).
# Usage: ci/estimate/probe-l1.sh OUTDIR   (python3 with CuPy, and ncu, on PATH)
set -u
out="$1"; mkdir -p "$out"
here=$(dirname "$0")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/machine.txt"
python3 "$here/probe_l1.py" > "$out/timings.csv" 2> "$out/timings.err"; echo "timings: exit $?"
M="gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__sass_inst_executed_op_shared_ld.sum,sm__sass_inst_executed_op_global_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_lgds.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__lsu_writeback_active_mem_lgds.sum,l1tex__lsu_writeback_active_mem_shared.sum"
timeout 400 ncu --csv --metrics "$M" python3 "$here/probe_l1.py" --once > "$out/ncu.csv" 2> "$out/ncu.err"; echo "ncu: exit $?"
