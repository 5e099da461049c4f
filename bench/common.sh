# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# shellcheck disable=SC2034  # keep is for the scripts that source this file
# Sourced by the bench scripts, from the source root, right after `set -euo pipefail`: what every one of them
# needs.
#   log MESSAGE      to stderr, after the script's name;
#   die MESSAGE      logs "error: MESSAGE", sets keep=1 (a script's cleanup keeps its work directory for
#                    diagnosis when it looks at `keep`) and exits 1;
#   usage [STATUS]   prints the script's header comment (from line 2 to `set -euo pipefail`) and exits;
#   free_port        a loopback TCP port nothing listens on now (see below).
script_name=$(basename "$0")
keep=0
log() { echo "$script_name: $*" >&2; }
die() {
  log "error: $*"
  keep=1
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}

# etcd and Redis need fixed ports; batond picks its own with --listen :0. Calls `die` when none is found.
# Ports come from below the kernel's ephemeral range, so an outgoing connection (a load generator's, or
# anything else on the machine) cannot be holding the port when the server binds it; a server that still
# finds its port taken is started again on other ports by the caller.
free_port() {
  local p low
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  ((low > 12000)) || low=32768
  for _ in $(seq 50); do
    p=$((10000 + RANDOM % (low - 10000)))
    if ! ss -Htan "sport = :$p" | grep -q .; then
      echo "$p"
      return 0
    fi
  done
  die "no free port found"
}
