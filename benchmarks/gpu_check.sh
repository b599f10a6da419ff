#!/usr/bin/env bash
# One node's GPU check: GEMM sweeps at a model's own shapes (bf16 and fp8), the fused-attention benchmark, NCCL
# collectives on every local GPU, the node acceptance report and a calibration fit, each as JSON in OUT_DIR.
#
#   benchmarks/gpu_check.sh OUT_DIR            # on a GPU node (sized to finish in under 8 minutes on one H100/H200)
#   benchmarks/gpu_check.sh OUT_DIR --cpu      # the same steps on CPU at toy sizes (what the test suite runs)
#
# Settings (environment): PYTHON (default: python), GPU (catalog name; default from nvidia-smi), FABRIC
# (default ib-ndr-8x400), MODEL / TP / SEQ_LEN (the GEMM shapes; default Llama-3-8B, TP 1, 4096 tokens).
# Any wrong element in a GEMM or collective stops the script with status 1 (app.bench.tolerance); a failed
# acceptance check is recorded in acceptance_*.json and does not stop it.
set -euo pipefail

out=${1:?usage: gpu_check.sh OUT_DIR [--cpu]}
mode=${2:-gpu}
py=${PYTHON:-python}
mkdir -p "$out"
cli() { "$py" -m app.cli.main "$@"; }
step() { printf '== %s  %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if [ "$mode" = "--cpu" ]; then
  device=cpu
  gpus=2                                   # two gloo ranks stand in for the GPUs
  gpu=${GPU:-H100-SXM}
  gemm_shapes=(--shapes "64 64 64; 128 128 256")
  gemm_dtypes=(fp32)
  attention=(--kernel math --seq 128 --heads 2 --head-dim 32 --dtype fp32 --iters 2 --warmup-iters 1)
  collectives=(--minbytes 1K --maxbytes 64K --stepfactor 8 --iters 3 --warmup-iters 1)
  iters=(--iters 3 --warmup-iters 1)
else
  device=cuda
  gpus=$(nvidia-smi -L | wc -l)
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
  case "$name" in
    *H200*) default_gpu=H200-SXM ;;
    *H100*) default_gpu=H100-SXM ;;
    *B200*) default_gpu=B200 ;;
    *A100*80GB*) default_gpu=A100-80GB-SXM ;;
    *A100*) default_gpu=A100-40GB-SXM ;;
    *) default_gpu=H100-SXM ;;
  esac
  gpu=${GPU:-$default_gpu}
  gemm_shapes=(--model "${MODEL:-llama-3-8b}" --tp "${TP:-1}" --seq-len "${SEQ_LEN:-4096}")
  gemm_dtypes=(bf16 fp8)
  attention=(--kernel cudnn,flash-attention-2 --seq 4096,16384 --iters 10 --warmup-iters 3)
  # one GPU: a 1-rank communicator still runs NCCL's kernels (loopback) and is timed with CUDA events
  collectives=(--minbytes 8 --maxbytes 1G --stepfactor 4 --iters 20 --warmup-iters 5)
  iters=(--iters 50 --warmup-iters 10)
fi
fabric=${FABRIC:-ib-ndr-8x400}

for dtype in "${gemm_dtypes[@]}"; do
  step "GEMM $dtype on $device"
  cli bench gemm --device "$device" --dtype "$dtype" "${gemm_shapes[@]}" "${iters[@]}" --out "$out/gemm_$dtype.json" >&2
done
step "fused attention"
cli bench attention --device "$device" "${attention[@]}" --out "$out/attention.json" >&2
step "collectives on $gpus ranks"
cli bench collectives --op all_reduce,all_gather,reduce_scatter --nproc "$gpus" --device "$device" \
  "${collectives[@]}" --out "$out/collectives.json" >&2

for part in "gemm_${gemm_dtypes[0]}" collectives; do
  step "acceptance of $part against $gpu / $fabric"
  cli bench check "$out/$part.json" --gpu "$gpu" --fabric "$fabric" --json > "$out/acceptance_$part.json" || true
done

step "calibration fit"
export CLUSTERPLAN_DATABASE_URL="sqlite:///$out/calibration.db"
cli db upgrade >&2
for part in "gemm_${gemm_dtypes[0]}" collectives; do
  # the override and force keep a profile for inspection even from a failing or non-improving run; the
  # report inside says which it was
  cli calibrate fit "$out/$part.json" --name "gpu-check-$part" --gpu "$gpu" --fabric "$fabric" \
    --override-acceptance --force --json > "$out/profile_$part.json"
done
step "done: $out"
