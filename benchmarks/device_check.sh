#!/usr/bin/env bash
# One prepared run on a GPU machine (the `device` tool of this workplace), in order of value, under one time
# budget (DEVICE_BUDGET_S, default 555 s: one device command is at most 10 min). Two plans (DEVICE_PLAN):
#   rest (the default: what the first GPU run left, 2026-12-04):
#     0. smoke: the package imports, sees the GPU and trains 20 full-size steps (fails fast: exit 3);
#     1. Mixer vs transformer at full size, S = 16, s = 3 and 4, the other two learning rates of each arm
#        (1e-4, 1e-3; 3e-4 ran in the first plan: reference/sparse_mixer_full_lr3e-4_gpu_summary.json);
#     2. the staircase's full transformer with AdamW at the paper's batch of 3000 (2000 steps), seed 0 (the paper's
#        SGD run at that batch ran on the CPU, 2026-12-05: reference/staircase_full_sgd_transformer_summary.json);
#     3. Mixer vs transformer at s = 5 and 6, both arms at lr 3e-4.
#   first (the run of 2026-12-04, kept to reproduce it): 0. smoke; 1. the sparse anchors (16, 4) and (32, 3) at
#     full size, 16 seeds each in programs of 8 seeds; 2. Mixer vs transformer at S = 16, s = 3 and 4, both arms at
#     lr 3e-4; 3. ChEES with K = 1024 chains against the NUTS default; 4. the staircase at the paper's size, one
#     seed; 5. the default phase diagram (no figures).
# Each step gets what is left of the budget (at most its own cap) and is skipped under 30 s; runs are
# resumable (a step cut off keeps its finished points). After every step the results and logs are packed into
# $OUT/device.tgz (the device tool brings back at most 8 files), and $OUT/times.txt lists each step's time.
# Needs blackjax and pydantic as wheels in .whl/ (the image has jax, numpyro, optax, equinox, matplotlib, tqdm).
#   DEVICE_REHEARSAL=1 bash benchmarks/device_check.sh   # the same steps at toy sizes, on a CPU, in a few minutes
# Not in either plan (left for longer leases): s = 7, 8 and the other rates at s >= 5, the staircase's 8 seeds on
# the GPU (they ran on the CPU), bench_sampling.py and bench_scaleout.py --only batch.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="/tmp/site:$PWD" BAYESATTN_CACHE_DIR=/tmp/bayesattn_cache
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
W=/tmp/device_work; R=$W/results; mkdir -p "$R" "$W/logs"
PY=${PYTHON:-python3}
START=$(date +%s); BUDGET=${DEVICE_BUDGET_S:-555}
if [ "${DEVICE_REHEARSAL:-0}" = 1 ]; then  # toy sizes: checks the commands, not the numbers
  TOY=(--set train.steps=200 --set train.tokens_per_step=512 --set train.width=16 --set train.mlp=32 --set train.record_every=50)
  ANCHOR=(--set seeds=2 --set seeds_per_program=1); MIXER=(--set seeds=2 --set seeds_per_program=2)
  ENS=(--T 8 --chains 16 --warmup-chains 4 --ess-draws 100 --ess-warmup 100); STAIR=(--set train.steps=20 --set train.batch_size=100 --set train_variants.transformer.steps=20); SMOKE_STEPS=20
else
  TOY=(); ANCHOR=(--set seeds_per_program=8); MIXER=(); ENS=(--T 32 --chains 1024 --warmup-chains 64); STAIR=(); SMOKE_STEPS=20
  [ -d .whl ] && { $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; }
fi
pack() { tar czf "$OUT/device.tgz.part" -C "$W" . && mv "$OUT/device.tgz.part" "$OUT/device.tgz"; }
step() {  # step NAME CAP_S COMMAND...: runs within min(CAP_S, what is left), logs to logs/NAME.txt
  local name=$1 cap=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - START) - 15 )) limit
  limit=$(( cap < left ? cap : left ))
  if [ "$limit" -lt 30 ]; then echo "=== $name: skipped (${left} s left)" | tee -a "$OUT/times.txt"; return; fi
  echo "=== $name (limit $limit s)"; local t0=$(date +%s)
  timeout "$limit" "$@" > "$W/logs/$name.txt" 2>&1; local rc=$?
  tail -n 25 "$W/logs/$name.txt" | tr '\r' '\n' | tail -n 25
  echo "=== $name: rc $rc, $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"; pack; return $rc
}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  $PY -c "import jax, numpyro, optax, blackjax, equinox, pydantic; print('jax', jax.__version__, jax.devices(), 'numpyro', numpyro.__version__, 'optax', optax.__version__, 'blackjax', blackjax.__version__, 'equinox', equinox.__version__, 'pydantic', pydantic.__version__)"
  nproc; git log -1 --format='commit %H' 2>/dev/null; } 2>&1 | tee "$W/logs/env.txt" "$OUT/env.txt"

step smoke 90 $PY - "$SMOKE_STEPS" "${DEVICE_REHEARSAL:-0}" <<'EOF' || { echo "smoke failed: stopping"; exit 3; }
import sys, time
import jax
from bayesattn.experiments.sparse import Sparse
from bayesattn.experiments.sparse.training import train_seeds
steps, toy = int(sys.argv[1]), sys.argv[2] == "1"
cfg = Sparse.load_config("sparse_anchor").train_config(S=16, s=4)
if toy:
    cfg = cfg.replace(width=16, mlp=32, tokens_per_step=512)
cfg = cfg.replace(steps=steps, record_every=10, stop_after_solved=0)
for n in (1, 8):
    t0 = time.perf_counter(); train_seeds(cfg, list(range(n)), record_attention=False); t1 = time.perf_counter()
    r = train_seeds(cfg, list(range(n)), record_attention=False); t2 = time.perf_counter()
    print(f"{jax.devices()[0]} seeds={n}: compile+{steps} steps {t1 - t0:.1f} s; {steps} steps {t2 - t1:.2f} s "
          f"= {n * steps / (t2 - t1):.0f} seed-steps/s")
EOF

if [ "${DEVICE_PLAN:-rest}" = first ]; then
step sparse_anchor 270 $PY -m bayesattn.cli run sparse --config sparse_anchor --set 'grid=[[16,4],[32,3]]' \
  "${ANCHOR[@]}" "${TOY[@]}" --no-figures --out "$R/sparse_anchor_gpu"
step mixer 170 $PY -m bayesattn.cli run sparse --config sparse_mixer_vs_transformer --set 'mixer_s=[3,4]' \
  --set 'mixer_lr.transformer=[3e-4]' --set 'mixer_lr.mixer=[3e-4]' "${MIXER[@]}" "${TOY[@]}" --no-figures \
  --out "$R/mixer_gpu"
step ensemble 90 $PY benchmarks/bench_ensemble.py --only ess "${ENS[@]}"
step staircase 60 $PY -m bayesattn.cli staircase --config staircase_full --parts train --set train_only=main \
  --set train_seeds=1 "${STAIR[@]}" --quiet --no-figures --out "$R/staircase_full_gpu"
step phase_diagram 80 $PY -m bayesattn.cli run phase-diagram --quiet --no-figures --out "$R/phase_diagram_gpu"
else
step mixer_lr 250 $PY -m bayesattn.cli run sparse --config sparse_mixer_vs_transformer --set 'mixer_s=[3,4]' \
  --set 'mixer_lr.transformer=[1e-4,1e-3]' --set 'mixer_lr.mixer=[1e-4,1e-3]' "${MIXER[@]}" "${TOY[@]}" \
  --no-figures --out "$R/mixer_lr_gpu"
step staircase_variants 120 $PY -m bayesattn.cli staircase --config staircase_full --parts train \
  --set 'train_only=["transformer"]' "${STAIR[@]}" --quiet --no-figures \
  --out "$R/staircase_variants_gpu"
step mixer_s56 150 $PY -m bayesattn.cli run sparse --config sparse_mixer_vs_transformer --set 'mixer_s=[5,6]' \
  --set 'mixer_lr.transformer=[3e-4]' --set 'mixer_lr.mixer=[3e-4]' "${MIXER[@]}" "${TOY[@]}" --no-figures \
  --out "$R/mixer_s56_gpu"
fi
echo "total $(( $(date +%s) - START )) s" | tee -a "$OUT/times.txt"
