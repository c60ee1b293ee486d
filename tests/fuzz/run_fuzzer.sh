#!/usr/bin/env bash
# run_fuzzer.sh FUZZER WORK_DIR SEED_DIR [libFuzzer options...]
# Runs FUZZER from the seeds in SEED_DIR alone: WORK_DIR/corpus starts empty and receives the
# new inputs (the checked-in seeds are never written to); a failing input lands in
# WORK_DIR/artifacts/.
set -euo pipefail
fuzzer=$1 work=$2 seeds=$3
shift 3
rm -rf "$work/corpus"
mkdir -p "$work/corpus" "$work/artifacts"
exec "$fuzzer" -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds"
