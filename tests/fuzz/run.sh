#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer target for a bounded time, starting from its seed corpus (tests/fuzz/corpus/<target>).
# Any finding (crash, sanitizer report, timeout, out-of-memory) fails the run; the input that caused it is
# kept in <build>/fuzz-findings/.
#
# usage: tests/fuzz/run.sh [seconds-per-target] [build-dir]     (defaults: 30, build/fuzz)
# The targets must be built first: cmake --preset fuzz && cmake --build --preset fuzz
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-30}
build=${2:-build/fuzz}
targets=(fuzz_server_request fuzz_lock_service fuzz_cron fuzz_agent_config fuzz_sdk_reply)

findings="$build/fuzz-findings"
mkdir -p "$findings"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=()
for t in "${targets[@]}"; do
  bin="$build/fuzz/$t"
  if [[ ! -x $bin ]]; then
    echo "fuzz: $bin is missing (cmake --build --preset fuzz)" >&2
    exit 2
  fi
  mkdir -p "$work/$t"
  log="$findings/$t.log"
  # New inputs go to a scratch corpus; the committed seeds are only read.
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$findings/$t-" "$work/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    runs=$(grep -m1 '^stat::number_of_executed_units' "$log" | awk '{print $2}')
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+' || true)
    echo "fuzz: $t ok (${seconds}s, ${runs:-?} runs, ${cov:-cov: ?})"
  else
    echo "fuzz: $t FAILED; log $log; the input is in $findings/" >&2
    grep -E 'ERROR|runtime error|invariant|SUMMARY|Test unit written' "$log" | head -20 >&2 || tail -30 "$log" >&2
    failed+=("$t")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz: findings in ${failed[*]}" >&2
  exit 1
fi
