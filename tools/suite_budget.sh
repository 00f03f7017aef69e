#!/usr/bin/env bash
# Prints the test suite's time budget in seconds on this machine (.ci/run fails a suite over it).
# The goal is 12 minutes on two cores. CPUs of this size differ: the whole suite took 2.3x longer on the
# Intel Xeon kind (AVX-512 without bf16) than on the AMD EPYC kind (AVX-512 with bf16) the same week, so
# the budget is the goal times a margin on a CPU with bf16, and that ratio more where it has none.
# ALBERT_TF_SUITE_BUDGET_S overrides it (a much slower or busier machine).
set -euo pipefail
if [ -n "${ALBERT_TF_SUITE_BUDGET_S:-}" ]; then
  if ! [[ $ALBERT_TF_SUITE_BUDGET_S =~ ^[0-9]+$ ]]; then
    echo "error: ALBERT_TF_SUITE_BUDGET_S=$ALBERT_TF_SUITE_BUDGET_S: expected whole seconds" >&2
    exit 1
  fi
  echo "$ALBERT_TF_SUITE_BUDGET_S"
elif grep -qw avx512_bf16 /proc/cpuinfo; then
  echo 900    # 12 min x 1.25
else
  echo 2100   # 12 min x 1.25 x 2.3, rounded up
fi
