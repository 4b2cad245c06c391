#!/usr/bin/env bash
# A scaling sweep: one batch job per (nodes x tasks per node) point, each a full training run.
#   slurm/sweep.sh [-n] [--suite] POINT... [-- train options...]      POINT: NODESxTASKS, e.g. 1x1 1x2 2x4
#   BENCH=ncf slurm/sweep.sh 1x1 1x2 1x4 -- --data-dir /shared/data
# -n: print the sbatch commands, submit nothing. --suite: submit slurm/suite.sbatch (every workload)
# instead of slurm/train.sbatch. The jobs get --exclusive so that points do not share nodes
# (SWEEP_SBATCH_FLAGS replaces it, e.g. SWEEP_SBATCH_FLAGS="-p gpu -t 2:00:00"; empty for none).
# Each job's results land in results/slurm-<jobid>/slurm-<N>x<T>/<bench>/; the list of points and
# job ids goes to results/sweep-<date>-<pid>.txt (RESULTS_ROOT replaces results/). The environment
# (BENCH, LAUNCHER, SCALE, ...; see slurm/lib.sh) is passed on to the jobs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export MLPD_ROOT=${MLPD_ROOT:-$(dirname "$here")}
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
dry=0
script=$here/train.sbatch
points=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) dry=1 ;;
    --suite) script=$here/suite.sbatch ;;
    -h | --help) usage ;;
    --) shift; break ;;
    *) [[ $1 =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || { echo "sweep: '$1' is not a point NODESxTASKS (e.g. 2x4)" >&2; usage; }
       points+=("$1") ;;
  esac
  shift
done
[ ${#points[@]} -gt 0 ] || { echo "sweep: no points given" >&2; usage; }
read -r -a flags <<< "${SWEEP_SBATCH_FLAGS---exclusive}"
name=$(basename "$script" .sbatch)
manifest=${RESULTS_ROOT:-results}/sweep-$(date +%Y%m%d-%H%M%S)-$$.txt
[ $dry = 1 ] || { mkdir -p "$(dirname "$manifest")"; echo "# point jobid results ($name ${BENCH:-}) $*" > "$manifest"; }
for p in "${points[@]}"; do
  n=${p%x*} t=${p#*x}
  cmd=(sbatch --parsable -N "$n" --ntasks-per-node="$t" -J "mlperf-$name-$p" "${flags[@]}" "$script" "$@")
  if [ $dry = 1 ]; then
    echo "${cmd[*]}"
    continue
  fi
  job=$("${cmd[@]}")
  job=${job%%;*}  # --parsable prints "id" or "id;cluster"
  echo "$p $job ${RESULTS_ROOT:-results}/slurm-$job" | tee -a "$manifest"
done
[ $dry = 1 ] || echo "sweep: ${#points[@]} job(s) submitted; list in $manifest (squeue --me to follow)"
