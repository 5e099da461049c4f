#!/usr/bin/env bash
# Installs every Debian 12 package Baton needs to build, test, demo and benchmark.
# Idempotent and non-interactive: only missing packages are installed.
set -euo pipefail

packages=(
  # toolchain (make too: a plain `cmake -S . -B build` uses the Makefile generator)
  g++ cmake ninja-build make ccache pkg-config git
  # Boost 1.81 (the unversioned libboost-all-dev is 1.74, too old for us)
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libboost-test1.81-dev libboost-program-options1.81-dev
  # TLS (openssl: the tests make a throwaway CA and certificates at run time)
  libssl-dev openssl
  # fuzzing: clang with libFuzzer and the sanitizer runtimes (the `fuzz` preset)
  clang-14 libclang-rt-14-dev
  # baton-agent: YAML configuration, time zones (Howard Hinnant's date/tz over the system tz database)
  libyaml-cpp-dev libhowardhinnant-date-dev tzdata
  # demo and tooling; python3-yaml for the offline checks of the deployment files
  curl procps iproute2 python3 python3-yaml
  # benchmarks: the etcd and Redis comparisons, wrk as a second load generator, gnuplot for the plots
  wrk etcd-server etcd-client redis-server redis-tools gnuplot-nox
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
