#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A failing seed's --trace is the history of a shrunk run: shorter than the whole run's, with faults left
# out, and the replay command it names fails with the same kind of violation.
#   check_shrink.sh BATON_SIM SEED BUG
set -u
sim=$1 seed=$2 bug=$3
report=$("$sim" --seed "$seed" --bug "$bug" --trace 2>&1 >/dev/null)
echo "$report"
kind=$(sed -n 's/^shrunk seed [0-9]* in [0-9]* runs: \([a-z_]*\) still shows.*/\1/p' <<<"$report")
replay=$(sed -n 's/^replay: baton-sim \(.*\) --trace$/\1/p' <<<"$report")
[ -n "$kind" ] && [ -n "$replay" ] || { echo "no shrunk run reported"; exit 1; }
grep -q -- '--skip-faults' <<<"$replay" || { echo "no fault was left out"; exit 1; }
full=$("$sim" --seed "$seed" --bug "$bug" --no-shrink --trace 2>/dev/null | grep -c '^{')
# shellcheck disable=SC2086 # the replay's options, word by word
short=$("$sim" $replay --trace 2>/dev/null | grep -c '^{')
echo "events: $short of $full"
[ "$short" -lt "$full" ] || { echo "the shrunk run is not shorter"; exit 1; }
# shellcheck disable=SC2086
"$sim" $replay | grep -q "^VIOLATION $kind:" || { echo "the replay does not show $kind"; exit 1; }
echo "shrunk run replays $kind"
