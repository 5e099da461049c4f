#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How long a baton-agent group is without a cron runner when its leader dies or stops: batond and three
# agents on loopback (election ttl 2s, one job every second with misfire: run_once, running /bin/true).
# Each trial finds the leader through the sidecars, stops it, and measures from that instant to the first
# `event=job_started` with a larger token in another agent's log (the log's own timestamp; same machine
# clock). Two series: crash (kill -9) and graceful (SIGTERM). Figures and method: docs/benchmarks-sdk-agent.md.
#
#   bash bench/agent-failover.sh [TRIALS]      (default 20 per series)
#
# Needs bash 5 ($EPOCHREALTIME), curl and awk; no python. Environment: AGENT_BENCH_BUILD=0 skips the build;
# AGENT_BENCH_KEEP=1 keeps the agents' logs (the directory is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/common.sh
source bench/common.sh
bin=build/release/bin
trials=${1:-20}
ttl_ms=2000


if [[ ${AGENT_BENCH_BUILD:-1} != 0 ]]; then
  log "building Release"
  cmake --preset release >/dev/null
  cmake --build --preset release --target batond baton-agent >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/baton-agent-failover.XXXXXX")
batond_pid=""
declare -A agent_pid agent_api
cleanup() {
  local status=$?
  # Agents first, so they can release their lease while batond still answers.
  for n in 1 2 3; do
    [[ -n ${agent_pid[$n]:-} ]] && kill -TERM "${agent_pid[$n]}" 2>/dev/null || true
  done
  for pid in "${agent_pid[@]}"; do { wait "$pid"; } 2>/dev/null || true; done
  [[ -n $batond_pid ]] && kill -TERM "$batond_pid" 2>/dev/null || true
  { wait "$batond_pid"; } 2>/dev/null || true
  if ((status == 0)) && [[ ${AGENT_BENCH_KEEP:-0} == 0 ]]; then rm -rf "$work"; else log "logs kept in $work"; fi
}
trap cleanup EXIT
trap "exit 130" INT TERM  # through the EXIT trap, so nothing is left running

wait_listening() { # FILE NAME PID -> HOST:PORT
  for _ in $(seq 100); do
    grep -q "listening on" "$1" 2>/dev/null && break
    kill -0 "$3" 2>/dev/null || break
    sleep 0.05
  done
  sed -n "s/^$2 listening on //p" "$1" | tail -n 1
}

"$bin/batond" --data-dir "$work/data" --listen 127.0.0.1:0 --log-level warn >"$work/batond.out" 2>"$work/batond.err" &
batond_pid=$!
server=$(wait_listening "$work/batond.out" batond "$batond_pid")
[[ -n $server ]] || die "batond did not start: $(cat "$work/batond.err")"

cat >"$work/agent.yaml" <<YAML
server: http://$server
listen: 127.0.0.1:0
election:
  key: bench/agent-failover
  ttl: ${ttl_ms}ms
jobs:
  - name: tick
    schedule: "* * * * * *"
    misfire: run_once
    command: ["/bin/true"]
YAML

start_agent() { # N: starts node-N, appending to its logs
  local n=$1
  "$bin/baton-agent" --config "$work/agent.yaml" --identity "node-$n" >"$work/agent-$n.out" 2>>"$work/agent-$n.err" &
  agent_pid[$n]=$!
  agent_api[$n]=$(wait_listening "$work/agent-$n.out" baton-agent "${agent_pid[$n]}")
  [[ -n ${agent_api[$n]} ]] || die "node-$n did not start: $(tail -n 5 "$work/agent-$n.err")"
}

leader() { # prints "N TOKEN" of the agent whose sidecar says it leads
  local n r
  for n in 1 2 3; do
    [[ -n ${agent_api[$n]:-} ]] || continue
    r=$(curl -s -m 1 "http://${agent_api[$n]}/v1/leader" 2>/dev/null) || continue
    if [[ $r == *'"is_leader":true'* ]]; then
      echo "$n $(sed -n 's/.*"token":\([0-9]*\).*/\1/p' <<<"$r")"
      return
    fi
  done
}

wait_leader() {
  local l
  for _ in $(seq 200); do
    l=$(leader)
    [[ -n $l ]] && {
      echo "$l"
      return
    }
    sleep 0.05
  done
  die "no leader elected within 10 s"
}

# Milliseconds since the epoch of an ISO-8601 UTC timestamp (2025-11-30T01:46:19.123Z), in plain awk
# (mawk has no mktime): days from the civil date (H. Hinnant's algorithm), then the time of day.
awk_epoch_ms='
function epoch_ms(ts,   y, mo, d, era, yoe, doy, doe) {
  y = substr(ts, 1, 4) + 0; mo = substr(ts, 6, 2) + 0; d = substr(ts, 9, 2) + 0
  y -= (mo <= 2)
  era = int((y >= 0 ? y : y - 399) / 400)
  yoe = y - era * 400
  doy = int((153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5) + d - 1
  doe = yoe * 365 + int(yoe / 4) - int(yoe / 100) + doy
  return ((era * 146097 + doe - 719468) * 86400 + substr(ts, 12, 2) * 3600 + substr(ts, 15, 2) * 60 \
          + substr(ts, 18, 2)) * 1000 + substr(ts, 21, 3)
}'

# The first line with EVENT whose token is above (gt) or equal to (eq) TOKEN in the given logs: prints its
# epoch ms, or nothing.
first_event() { # EVENT gt|eq TOKEN FILE...
  local event=$1 op=$2 token=$3
  shift 3
  awk -v ev="event=$event" -v op="$op" -v tok="$token" "$awk_epoch_ms"'
    index($0, " " ev " ") {
      t = -1
      for (i = 2; i <= NF; i++) if ($i ~ /^token=/) t = substr($i, 7) + 0
      if ((op == "gt" && t > tok) || (op == "eq" && t == tok)) {
        ms = epoch_ms(substr($1, 4)); if (best == "" || ms < best) best = ms  # $1 is ts=...
      }
    }
    END { if (best != "") printf "%.0f\n", best }' "$@"
}

# One trial: stop the leader with SIGNAL, time the first run under a larger token, restart the leader. Sets
# run_ms, elected_ms and released_ms (milliseconds from the stop to the first run, to the new leader's
# election, and to the old leader's release; released is empty after kill -9). Not run in a subshell: it
# restarts an agent.
run_ms="" elected_ms="" released_ms=""
trial() { # SIGNAL
  local sig=$1 l n token m
  l=$(wait_leader)
  [[ -n $l ]] || exit 1
  read -r n token <<<"$l"
  local others=()
  for m in 1 2 3; do [[ $m == "$n" ]] || others+=("$work/agent-$m.err"); done
  # Stop at a random instant, so the stop is not in step with the 1 s slots or the leader's renewals.
  sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
  local t0=$EPOCHREALTIME
  kill "-$sig" "${agent_pid[$n]}"
  # Reap a killed agent at once, inside the redirection: bash reports "Killed" when it reaps such a child.
  if [[ $sig == KILL ]]; then { wait "${agent_pid[$n]}"; } 2>/dev/null || true; fi
  local run="" elected="" released=""
  for _ in $(seq 200); do
    run=$(first_event job_started gt "$token" "${others[@]}")
    [[ -n $run ]] && break
    sleep 0.05
  done
  [[ -n $run ]] || die "no job_started with a token above $token within 10 s of kill -$sig node-$n"
  elected=$(first_event elected gt "$token" "${others[@]}")
  { wait "${agent_pid[$n]}"; } 2>/dev/null || true
  released=$(first_event released eq "$token" "$work/agent-$n.err")
  start_agent "$n"
  since_stop() { [[ -n $1 ]] && awk -v a="$1" -v t="$t0" 'BEGIN { printf "%.1f\n", a - t * 1000 }'; }
  run_ms=$(since_stop "$run")
  elected_ms=$(since_stop "$elected")
  released_ms=$(since_stop "$released" || true)
}

# p50, p99 (nearest rank: with 20 samples p99 is the largest) and max of a column of numbers.
percentiles() {
  sort -n | awk '{ v[NR] = $1 } END {
    r50 = int(NR * 0.50); if (r50 < NR * 0.50) r50++; r99 = int(NR * 0.99); if (r99 < NR * 0.99) r99++
    printf "p50_ms=%.1f p99_ms=%.1f max_ms=%.1f min_ms=%.1f", v[r50], v[r99], v[NR], v[1] }'
}

for n in 1 2 3; do start_agent "$n"; done
log "batond $server; agents ${agent_api[*]}; ttl ${ttl_ms} ms; $trials trials per series;" \
  "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
wait_leader >/dev/null
sleep 1

for series in crash graceful; do
  sig=KILL
  [[ $series == graceful ]] && sig=TERM
  : >"$work/$series.txt"
  for i in $(seq "$trials"); do
    trial "$sig"
    echo "$run_ms $elected_ms ${released_ms:--}" >>"$work/$series.txt"
    log "$series trial $i: first run ${run_ms} ms after the stop (elected ${elected_ms} ms," \
      "old leader released ${released_ms:--} ms)"
    sleep 1  # the restarted agent campaigns (long-polls) like the other standby before the next trial
  done
  line="series=$series trials=$trials ttl_ms=$ttl_ms"
  line+=" first_run_$(cut -d' ' -f1 "$work/$series.txt" | percentiles | sed 's/ / first_run_/g')"
  line+=" elected_$(cut -d' ' -f2 "$work/$series.txt" | percentiles | sed 's/ / elected_/g')"
  if [[ $series == graceful ]]; then
    line+=" released_$(cut -d' ' -f3 "$work/$series.txt" | percentiles | sed 's/ / released_/g')"
  fi
  echo "$line"
done
# Slots that started more than once across the group (a new leader's misfire run of a slot its predecessor
# had already run): not a failover time, but the same logs show it.
awk '/ event=job_started / { for (i = 2; i <= NF; i++) if ($i ~ /^slot=/) n[$i]++ }
  END { for (s in n) { slots++; if (n[s] > 1) twice++ }
        printf "slots=%d slots_started_more_than_once=%d\n", slots, twice }' "$work"/agent-*.err
log "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
