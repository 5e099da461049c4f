#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The leader-elected cron demo: batond, three baton-agents and fenced-store on loopback. A job every 2 seconds
# writes to fenced-store with its fencing token. The demo kills the leader (kill -9), watches a standby take
# over with a larger token, then freezes the new leader (SIGSTOP) past its TTL while its job is mid-write,
# and shows fenced-store refusing that job's late write. Then it asks the leader's sidecar API for the job's
# history, runs a job now and suspends one. Expects the Release build (examples/demo.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin

work=$(mktemp -d /tmp/baton-agent-demo.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

wait_listening() {  # FILE NAME -> HOST:PORT
  for _ in $(seq 1 100); do
    grep -q "listening on" "$1" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "listening on" "$1" || { echo "agent-demo: $2 did not start" >&2; exit 1; }
  sed -n "s/^$2 listening on //p" "$1"
}
t0=$(date +%s%N)
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
say() {
  local ms
  ms=$(ms_since "$t0")
  printf '[%3d.%01d s] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*"
}

"$bin/batond" --listen 127.0.0.1:0 --data-dir "$work/data" --log-level warn >"$work/batond.out" 2>"$work/batond.err" &
pids+=($!)
server=$(wait_listening "$work/batond.out" batond)
"$bin/fenced-store" --listen 127.0.0.1:0 >"$work/store.out" 2>"$work/store.err" &
pids+=($!)
store=$(wait_listening "$work/store.out" fenced-store)

# The job writes once, works for 3 s (longer than the 2 s TTL), then writes its result with the same token.
put="curl -s -o /dev/null -X PUT -H \"Fencing-Token: \$BATON_FENCING_TOKEN\" --data \"\$BATON_IDENTITY\" http://$store/items/report"
cat >"$work/agent.yaml" <<YAML
server: http://$server
listen: 127.0.0.1:0
shutdown_grace: 1s
election:
  key: demo/scheduler
  ttl: 2s
jobs:
  - name: report
    schedule: "*/2 * * * * *"
    misfire: run_once
    shell: true
    command: ['$put; sleep 3; $put']
    grace: 1s
  - name: hello
    schedule: "0 0 1 1 *"
    shell: true
    command: 'echo "hello from \$BATON_IDENTITY, token \$BATON_FENCING_TOKEN"'
YAML

declare -A agent_pid agent_api
for n in 1 2 3; do
  "$bin/baton-agent" --config "$work/agent.yaml" --identity "node-$n" >"$work/agent-$n.out" 2>"$work/agent-$n.err" &
  agent_pid[$n]=$!
  pids+=($!)
  agent_api[$n]=$(wait_listening "$work/agent-$n.out" baton-agent)
done

leader() {  # prints "N TOKEN" of the agent that leads, by asking each sidecar
  for n in 1 2 3; do
    [[ -n "${agent_api[$n]:-}" ]] || continue
    local r
    r=$(curl -s -m 2 "http://${agent_api[$n]}/v1/leader" 2>/dev/null) || continue
    if [[ $r == *'"is_leader":true'* ]]; then
      echo "$n $(sed -n 's/.*"token":\([0-9]*\).*/\1/p' <<<"$r")"
      return
    fi
  done
}
wait_leader() {  # waits for a leader other than $1
  for _ in $(seq 1 200); do
    local l
    l=$(leader)
    if [[ -n "$l" && "${l%% *}" != "${1:-}" ]]; then
      echo "$l"
      return
    fi
    sleep 0.05
  done
  echo "agent-demo: no leader elected" >&2
  exit 1
}

say "batond on $server, fenced-store on $store, three agents (node-1..3) campaigning for demo/scheduler"
read -r first first_token <<<"$(wait_leader)"
say "node-$first leads with token $first_token; its job writes to fenced-store every 2 s"
sleep 2.5

say "kill -9 node-$first (a crash: no release, no goodbye)"
{
  kill -9 "${agent_pid[$first]}"
  wait "${agent_pid[$first]}"
} 2>/dev/null || true
agent_api[$first]=""
crash_at=$(date +%s%N)
read -r second second_token <<<"$(wait_leader "$first")"
say "node-$second took over $(ms_since "$crash_at") ms after the crash, with token $second_token (> $first_token)"

# Freeze the new leader just after its job's first write: the job keeps running, the agent cannot renew.
for _ in $(seq 1 100); do
  grep -q "event=job_started" "$work/agent-$second.err" && break
  sleep 0.05
done
sleep 0.3
say "SIGSTOP node-$second while its job is mid-write (a long GC pause); its lease expires on the server"
kill -STOP "${agent_pid[$second]}"
saved_api=${agent_api[$second]}
agent_api[$second]=""
read -r third third_token <<<"$(wait_leader "$second")"
say "node-$third took over with token $third_token and runs the job at once"
sleep 3
say "SIGCONT node-$second: it finds its lease lost, stops its job and campaigns again"
kill -CONT "${agent_pid[$second]}"
agent_api[$second]=$saved_api
sleep 1

echo
echo "fenced-store's decisions, in order (token: accepted or refused):"
curl -s "http://$store/history" | sed -n 's/.*"token":\([0-9]*\),"accepted":\(true\|false\),"highest_token":\([0-9]*\).*/\1 \2 \3/p' |
  while read -r token accepted highest; do
    if [[ $accepted == true ]]; then
      echo "  token $token  accepted"
    else
      echo "  token $token  REFUSED: the store had already accepted token $highest"
    fi
  done
if curl -s "http://$store/history" | grep -q "\"token\":$second_token,\"accepted\":false"; then
  echo
  echo "agent-demo: node-$second's late write with token $second_token was refused; node-$third's token $third_token stands"
else
  echo "agent-demo: expected a refused write with token $second_token" >&2
  exit 1
fi

# The sidecar API of the agent that leads now.
read -r now_leader _ <<<"$(wait_leader)"
api=http://${agent_api[$now_leader]}
echo
for n in $(printf '%s\n' "$second" "$now_leader" | sort -u); do
  say "node-$n's runs of report (GET /v1/jobs/report; each agent keeps the runs it ran):"
  curl -s "http://${agent_api[$n]}/v1/jobs/report" | grep -o '"run_id":"[^"]*"\|"outcome":"[^"]*"\|"token":[0-9]*' |
    paste -d ' ' - - - | sed 's/"//g; s/^/  /'
done
say "baton-agent run-now hello (runs a job now, on the leader, with its token):"
"$bin/baton-agent" run-now hello --config "$work/agent.yaml" --listen "${agent_api[$now_leader]}" | sed 's/^/  /'
for _ in $(seq 1 100); do
  grep -q "event=job_finished job=hello" "$work/agent-$now_leader.err" && break
  sleep 0.05
done
grep -o 'line="hello from[^"]*"' "$work/agent-$now_leader.err" | head -1 | sed 's/^/  job output: /'
say "suspend report on node-$now_leader (its slots are skipped until resumed):"
echo "  $(curl -s -X POST "$api/v1/jobs/report/suspend")"
sleep 2.5
skipped=$(curl -s "$api/metrics" | sed -n 's/^baton_agent_job_slots_skipped_total{job="report",reason="suspended"} //p')
echo "  slots skipped while suspended: $skipped"
echo "  $(curl -s -X POST "$api/v1/jobs/report/resume")"
if [[ -z "$skipped" || "$skipped" == 0 ]]; then
  echo "agent-demo: expected skipped slots while report was suspended" >&2
  exit 1
fi
