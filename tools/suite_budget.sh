#!/usr/bin/env bash
# Prints the test suite's time budget in seconds on this machine (.ci/run fails a suite over it).
# The goal is 12 minutes on two cores; the budget leaves a margin for a machine shared with other work
# (CI's is: a quiet run of 11 min 41 s took 13 min 57 s beside other tests). CPUs of this size differ:
# the whole suite took 2.3x longer on the Intel Xeon kind (AVX-512 without bf16) than on the AMD EPYC
# kind (AVX-512 with bf16) the same week, so a CPU without bf16 gets that ratio more.
# The Intel Xeon kind with bf16 and AMX (2026-11-28) ran the suite of 826 tests in 1,681 s, quiet: the
# AMD EPYC figure holds for that CPU alone, every other kind gets the slower figure.
# ALBERT_TF_SUITE_BUDGET_S overrides it (a much slower or busier machine).
set -euo pipefail
if [ -n "${ALBERT_TF_SUITE_BUDGET_S:-}" ]; then
  if ! [[ $ALBERT_TF_SUITE_BUDGET_S =~ ^[0-9]+$ ]]; then
    echo "error: ALBERT_TF_SUITE_BUDGET_S=$ALBERT_TF_SUITE_BUDGET_S: expected whole seconds" >&2
    exit 1
  fi
  echo "$ALBERT_TF_SUITE_BUDGET_S"
elif grep -qw avx512_bf16 /proc/cpuinfo && grep -qw AuthenticAMD /proc/cpuinfo; then
  echo 1200   # 20 min
else
  echo 2760   # 20 min x 2.3
fi
