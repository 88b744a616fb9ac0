#!/bin/bash
# Map-reduce the per-rank logs of one run on a SLURM cluster, then advise from one summary.
#
#     sbatch examples/slurm_summarize.sh RUN_DIR
#
# Submitted as it is, this job is the launcher: it lists RUN_DIR's *.jsonl and *.jsonl.gz files
# (sorted by name, as `dflash-advise RUN_DIR` reads them), splits them into at most
# DFLASH_TASKS contiguous groups (default 32), and submits
#   1. a job array, one task per group: `dflash-advise summarize GROUP -o part-I.json` on a node
#      of its own, every core of it reading files in parallel (-j SLURM_CPUS_PER_TASK);
#   2. a reduce job that runs once every task has succeeded (afterok): the parts merged in order
#      into run.json (`dflash-advise summarize part-*.json -o run.json`).
# Then `dflash-advise OUT_DIR/run.json` advises as from the whole folder (docs/large-logs.md).
#
# Settings (environment, passed on to the jobs by sbatch):
#   DFLASH_SUMMARY_DIR  where the parts and run.json go (default: RUN_DIR/summaries)
#   DFLASH_TASKS        the most array tasks (default 32; never more than there are files)
#   DFLASH_ADVISE       the command (default: dflash-advise; e.g. "python3 -m advisor")
#   SBATCH              the submit command (default: sbatch)
# The #SBATCH lines below are defaults: override them on the command line (sbatch -c 32 ...).
#SBATCH --job-name=dflash-summarize
#SBATCH --cpus-per-task=16
#SBATCH --time=01:00:00
#SBATCH --output=dflash-summarize-%A_%a.out
set -euo pipefail

run_dir=${1:?usage: sbatch slurm_summarize.sh RUN_DIR}
stage=${2:-launch}
out_dir=${DFLASH_SUMMARY_DIR:-$run_dir/summaries}
read -r -a advise <<< "${DFLASH_ADVISE:-dflash-advise}"
read -r -a submit <<< "${SBATCH:-sbatch}"
self=${DFLASH_SELF:-$0}

launch() {
    [ -d "$run_dir" ] || { echo "slurm_summarize: $run_dir is not a directory" >&2; exit 2; }
    mkdir -p "$out_dir"
    find "$run_dir" -maxdepth 1 -type f \( -name '*.jsonl' -o -name '*.jsonl.gz' \) -print | LC_ALL=C sort \
        > "$out_dir/files.txt"
    local n tasks
    n=$(wc -l < "$out_dir/files.txt")
    [ "$n" -gt 0 ] || { echo "slurm_summarize: $run_dir holds no .jsonl or .jsonl.gz log" >&2; exit 2; }
    tasks=${DFLASH_TASKS:-32}
    [ "$tasks" -le "$n" ] || tasks=$n
    echo "$tasks" > "$out_dir/tasks"
    rm -f "$out_dir"/part-*.json "$out_dir/run.json"
    local array_id
    array_id=$("${submit[@]}" --parsable --array="0-$((tasks - 1))" "$self" "$run_dir" map)
    array_id=${array_id%%;*}
    "${submit[@]}" --parsable --dependency="afterok:$array_id" --cpus-per-task=1 "$self" "$run_dir" reduce
    echo "slurm_summarize: $n files in $tasks tasks (job $array_id), then the reduce into $out_dir/run.json"
}

map() {
    local i=${SLURM_ARRAY_TASK_ID:?the map stage runs as a task of the job array}
    local tasks n lo hi
    tasks=$(cat "$out_dir/tasks")
    n=$(wc -l < "$out_dir/files.txt")
    lo=$((i * n / tasks))                  # files [lo, hi) of the sorted list: contiguous groups
    hi=$(((i + 1) * n / tasks))
    mapfile -t files < <(sed -n "$((lo + 1)),${hi}p" "$out_dir/files.txt")
    "${advise[@]}" summarize "${files[@]}" -o "$out_dir/part-$(printf '%05d' "$i").json" \
        -j "${SLURM_CPUS_PER_TASK:-$(nproc)}"
}

reduce() {
    local tasks
    tasks=$(cat "$out_dir/tasks")
    mapfile -t parts < <(for ((i = 0; i < tasks; i++)); do printf '%s/part-%05d.json\n' "$out_dir" "$i"; done)
    "${advise[@]}" summarize "${parts[@]}" -o "$out_dir/run.json" -j 1
    echo "slurm_summarize: advise with: dflash-advise $out_dir/run.json"
}

case "$stage" in
    launch) launch ;;
    map) map ;;
    reduce) reduce ;;
    *) echo "slurm_summarize: unknown stage '$stage' (launch, map or reduce)" >&2; exit 2 ;;
esac
