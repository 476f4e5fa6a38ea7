#!/bin/bash
# One device session's measurements on the lent H200 (roofline/data/h200-measured/README.md says what each file is).
# Run from the repository root with OUT set; each step is time-boxed so the later ones still run, and the files
# so far are packed into $OUT/h200.tar after each step (what comes back if the call is cut short).
set -u
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 ROOFLINE_PROGRESS=0
D=roofline/data/h200-measured
W=/tmp/h200w; mkdir -p $W
pack() { tar -C $W -cf $OUT/h200.tar . ; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version,memory.total --format=csv > $W/gpu.txt 2>&1
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" >> $W/gpu.txt 2>&1
lscpu | grep -m1 'Model name' >> $W/gpu.txt; nproc >> $W/gpu.txt
cat $W/gpu.txt; pack
{ timeout 45 python3 benchmarks/grouped_gemm_experts.py --device cuda:0 --gpu h200
  timeout 45 python3 benchmarks/grouped_gemm_experts.py --device cuda:0 --gpu h200 --tokens 32768 --hidden 2048 --ffn 1536
} > $W/grouped_gemm.txt 2>&1; cat $W/grouped_gemm.txt; pack
timeout 40 python3 $D/gemm_rates.py burst > $W/gemm_burst.csv 2>&1; cat $W/gemm_burst.csv; pack
timeout 40 python3 $D/gemm_rates.py sustained --seconds 30 > $W/gemm_sustained.csv 2>&1; cat $W/gemm_sustained.csv; pack
{ timeout 60 python3 benchmarks/small_gpt_step.py --device cuda:0 --seq-len 1024 --micro-batch 8 --profile h200 --csv $W/steps_s1024.csv
  timeout 60 python3 benchmarks/small_gpt_step.py --device cuda:0 --seq-len 2048 --micro-batch 4 --profile h200 --csv $W/steps_s2048.csv
} > $W/steps.txt 2>&1; cat $W/steps.txt; pack
timeout 220 python3 -m roofline calibrate compute --device cuda:0 --dtype bf16 --base h200 --out $W/h200-measured > $W/compute.txt 2>&1; tail -22 $W/compute.txt; pack
timeout 75 python3 -m roofline calibrate host --device cuda:0 --style plain --runs 3 > $W/host_plain.txt 2>&1; cat $W/host_plain.txt; pack
ls -la $W
