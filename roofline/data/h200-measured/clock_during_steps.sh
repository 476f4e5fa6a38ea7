#!/bin/bash
# SM clock and board power sampled every 100 ms (nvidia-smi) while the small-GPT steps run, then while one 8192^3
# BF16 GEMM runs back to back: does a training step hold the clock that GEMMs alone settle at (sustained_clock)?
# Run from the repository root with OUT set (and pint on PYTHONPATH); writes $OUT/clock_during_steps.txt.
set -u
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
L=$OUT/clock_during_steps.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv,noheader -lms 100 > $OUT/smi.csv &
P=$!
mark() { echo "MARK $(date +%Y/%m/%d\ %H:%M:%S.%3N) $1" >> $L; }
sleep 2; mark idle_end
for s in gpt-1.3b gpt-350m; do
  mark "start $s"
  timeout 60 python3 benchmarks/small_gpt_step.py --device cuda:0 --seq-len 1024 --micro-batch 8 --sizes $s --profile h200 --warmup 5 --steps 40 >> $L 2>&1
  mark "end $s"
done
sleep 3; mark "start gemm"
timeout 30 python3 roofline/data/h200-measured/gemm_rates.py sustained --seconds 15 >> $L 2>&1
mark "end gemm"
kill $P; cat $OUT/smi.csv >> $L; rm $OUT/smi.csv
