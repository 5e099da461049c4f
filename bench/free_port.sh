# Sourced by the bench scripts. free_port: a loopback TCP port nothing listens on now (etcd needs fixed
# ports; batond picks its own with --listen :0). Calls `die` (the sourcing script's) when none is found.
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 30000))
    if ! ss -Htln "sport = :$p" | grep -q .; then
      echo "$p"
      return 0
    fi
  done
  die "no free port found"
}
