# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by the bench scripts. free_port: a loopback TCP port nothing listens on now (etcd and Redis need
# fixed ports; batond picks its own with --listen :0). Calls `die` (the sourcing script's) when none is found.
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
