#!/usr/bin/env bash
# One prepared run on a GPU machine (the `device` tool of this workplace): times the samplers, the training
# sweep and the default phase diagram there. Needs blackjax as a wheel in .whl/ (the image has jax, numpyro,
# optax, matplotlib, tqdm). Writes logs to $OUT. Each step has its own time limit; their sum is 550 s, so the
# whole fits one device command (10 min) and a 15-minute device budget with the machine's start. Left out for
# time (run them by hand when more device time is lent): bench_sampling.py --only draws / --only grad, and
# bench_scaleout.py --only batch.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="/tmp/site:$PWD"
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import jax, numpyro, optax, blackjax; print('jax', jax.__version__, jax.devices(), 'numpyro', numpyro.__version__, 'optax', optax.__version__, 'blackjax', blackjax.__version__)"
  nproc; } 2>&1 | tee "$OUT/env.txt"
step() { local name=$1 limit=$2; shift 2; echo "=== $name"; local t0=$(date +%s)
         timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"; echo "=== $name: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"; }
step chains_gpu 60 python3 benchmarks/bench_chains.py --T 32 --chains 4,64,512,4096
step training_gpu 60 python3 benchmarks/bench_training.py
step sparse_full_gpu 120 python3 benchmarks/bench_sparse.py --config sparse_full --S 16 --s 3 --full  # the anchor: 16/16, median t* 815
step staircase_full_gpu 90 python3 -m bayesattn.cli staircase --config staircase_full --parts train --set train_seeds=1 --quiet --no-figures --out /tmp/stair   # the paper's size, one seed: its time sizes the 8-seed run
step ensemble_grad_gpu 40 python3 benchmarks/bench_ensemble.py --only grad --T 32 64 --K 1 16 256 1024   # per chain-gradient vs K
step ensemble_gpu 100 python3 benchmarks/bench_ensemble.py --only ess --T 32 --chains 1024 --warmup-chains 64   # ChEES K = 1024 (all adapting, and 64 adapting) vs the NUTS default, ESS/s of m
step default_gpu 80 python3 -m bayesattn.cli phase-diagram --quiet --no-figures --out /tmp/pd
cp /tmp/pd/summary.json "$OUT/default_summary.json" 2>/dev/null

