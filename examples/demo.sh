#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The demo: builds Baton (Release), starts batond on loopback with a fresh data directory and replays the
# lock's timeline from docs/protocol.md with real HTTP calls, printing each step.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh test
cmake --preset release >/dev/null
cmake --build --preset release --target batond fenced-store baton-example-timeline baton-example-long-job \
  baton-agent

data_dir=$(mktemp -d /tmp/baton-demo.XXXXXX)
out="$data_dir/batond.out"
cleanup() {
  for pid in ${job_pid:-} ${store_pid:-} ${batond_pid:-}; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid"
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$data_dir"
}
trap cleanup EXIT

# wait_listening FILE NAME: waits for "NAME listening on HOST:PORT" in FILE and prints HOST:PORT.
wait_listening() {
  for _ in $(seq 1 100); do
    grep -q "listening on" "$1" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "listening on" "$1" || { echo "demo: $2 did not start" >&2; exit 1; }
  sed -n "s/^$2 listening on //p" "$1"
}

build/release/bin/batond --listen 127.0.0.1:0 --data-dir "$data_dir/data" --log-level warn >"$out" &
batond_pid=$!
addr=$(wait_listening "$out" batond)
base="http://$addr"

bold=$'\e[1m'; dim=$'\e[2m'; reset=$'\e[0m'
[[ -t 1 ]] || { bold=; dim=; reset=; }
step=0
# call WHO METHOD PATH [BODY]: one real HTTP call, printed with its answer.
call() {
  local who=$1 method=$2 path=$3 body=${4:-}
  step=$((step + 1))
  printf '%s%2d. %-9s%s %s %s %s\n' "$bold" "$step" "$who" "$reset" "$method" "$path" "$body"
  local args=(-sS -X "$method" -w '\n%{http_code} %{time_total}' "$base$path")
  [[ -n "$body" ]] && args+=(-H 'Content-Type: application/json' -d "$body")
  local reply
  reply=$(curl "${args[@]}")
  local tail=${reply##*$'\n'}
  last_status=${tail% *}
  last_body=${reply%$'\n'*}
  printf '    %s-> %s %s  (%.3f s)%s\n' "$dim" "$last_status" "$last_body" "${tail#* }" "$reset"
}
expect() {
  [[ "$last_status" == "$1" ]] || { echo "demo: expected HTTP $1, got $last_status" >&2; exit 1; }
}
field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$last_body"; }
say() {
  echo
  printf '%s\n' "$@"
}

echo "batond is serving on $base (data in $data_dir/data)"

say "worker-a takes the lock for 2 s and receives fencing token N."
call worker-a POST /v1/locks/nightly-report/acquire '{"owner":"worker-a","ttl_ms":2000}'
expect 200
n=$(field token)

say "worker-b asks too and is refused: the answer names the holder."
call worker-b POST /v1/locks/nightly-report/acquire '{"owner":"worker-b","ttl_ms":2000}'
expect 409

say "worker-a stalls (a GC pause, a lost network) and stops renewing. worker-b long-polls the lock;" \
  "the server's clock expires the lease and wakes worker-b at that instant."
call worker-b GET "/v1/locks/nightly-report?wait_ms=10000&token=$n"
expect 404

say "worker-b takes the lock and receives token N+1 = $((n + 1))."
call worker-b POST /v1/locks/nightly-report/acquire '{"owner":"worker-b","ttl_ms":10000}'
expect 200
[[ "$(field token)" == "$((n + 1))" ]] || { echo "demo: expected token $((n + 1))" >&2; exit 1; }

say "worker-a wakes up and tries to renew with its old token: refused, its lease is lost."
call worker-a POST /v1/locks/nightly-report/renew "{\"owner\":\"worker-a\",\"token\":$n,\"ttl_ms\":2000}"
expect 409

say "worker-a's release is refused too: a stale holder cannot free the new holder's lock."
call worker-a POST /v1/locks/nightly-report/release "{\"owner\":\"worker-a\",\"token\":$n}"
expect 409

say "worker-b renews and finally releases; a repeated release (lost reply, retry) is answered the same."
call worker-b POST /v1/locks/nightly-report/renew "{\"owner\":\"worker-b\",\"token\":$((n + 1)),\"ttl_ms\":10000}"
expect 200
call worker-b POST /v1/locks/nightly-report/release "{\"owner\":\"worker-b\",\"token\":$((n + 1))}"
expect 200
call worker-b POST /v1/locks/nightly-report/release "{\"owner\":\"worker-b\",\"token\":$((n + 1))}"
expect 200

say "Every write worker-a attempted after step 4 would carry token $n; the resource has seen $((n + 1)) and rejects it."

printf '\n%s== The same story with the C++ SDK and a fenced resource (examples/sdk-timeline) ==%s\n' "$bold" "$reset"
build/release/bin/fenced-store --listen 127.0.0.1:0 >"$data_dir/store.out" 2>"$data_dir/store.err" &
store_pid=$!
store_addr=$(wait_listening "$data_dir/store.out" fenced-store)
build/release/bin/baton-example-timeline --server "$base" --store "http://$store_addr"

printf '\n%s== A long job under a lease (examples/long-job) ==%s\n' "$bold" "$reset"
say "The job runs its steps inside baton::with_lease and finishes under a valid lease:"
build/release/bin/baton-example-long-job --server "$base" --key demo/long-job --ttl-ms 2000 --steps 3

say "Now the lock server freezes (SIGSTOP) mid-job: no renew is answered. The SDK gives the lease up at its" \
  "local deadline and cancels the job before the server could hand the lock to anyone else."
build/release/bin/baton-example-long-job --server "$base" --key demo/long-job --ttl-ms 2000 --steps 50 &
job_pid=$!
sleep 1
kill -STOP "$batond_pid"
job_status=0
wait "$job_pid" || job_status=$?
job_pid=
kill -CONT "$batond_pid"
[[ $job_status -eq 3 ]] || { echo "demo: expected the job to stop on lease loss (exit 3), got $job_status" >&2; exit 1; }

printf '\n%s== Leader-elected cron with baton-agent (examples/agent-demo.sh) ==%s\n' "$bold" "$reset"
bash examples/agent-demo.sh

say "demo: every step played as documented in docs/protocol.md, docs/sdk.md and docs/agent.md"
