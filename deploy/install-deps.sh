#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages Baton needs, by profile; the single list of every dependency.
#   bash deploy/install-deps.sh [build|test|bench|all]...   (default: all)
#     build  compile the programs and the SDK (the container images' build stage)
#     test   build, plus what the tests and the demo start or call (etcd, clang for the fuzz targets, curl...)
#     bench  build, plus the benchmarks' comparisons and tools (etcd, Redis, wrk, gnuplot)
# Idempotent and non-interactive: only missing packages are installed.
set -euo pipefail

build=(
  # toolchain (make too: a plain `cmake -S . -B build` uses the Makefile generator)
  g++ cmake ninja-build make ccache pkg-config git
  help2man dpkg-dev file  # man pages from --help; Debian packages with cpack (dpkg-shlibdeps)
  # Boost 1.81 (the unversioned libboost-all-dev is 1.74, too old for us)
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libboost-test1.81-dev libboost-program-options1.81-dev
  # TLS
  libssl-dev
  # baton-agent: YAML configuration, time zones (Howard Hinnant's date/tz over the system tz database)
  libyaml-cpp-dev libhowardhinnant-date-dev tzdata
  libpq-dev libsqlite3-dev  # the fenced-database examples (PostgreSQL client library, SQLite)
)
test=(
  # openssl: the tests make a throwaway CA and certificates at run time
  openssl
  # fuzzing: clang with libFuzzer and the sanitizer runtimes (the `fuzz` preset)
  clang-14 libclang-rt-14-dev
  lld  # the Debug builds link with it when present (CMakeLists.txt): a third of the linking time
  clang-format-14  # test_format: the tree is formatted as .clang-format says
  # the etcd backend's tests and the etcd chaos run
  etcd-server etcd-client
  strace  # test_etcd_disk_stall stalls an etcd leader's fsyncs (etcd is Go: LD_PRELOAD does not reach them)
  # demo and tooling; python3-yaml for the offline checks of the deployment files
  curl procps iproute2 python3 python3-yaml
  postgresql  # initdb, pg_ctl and postgres for test_fenced_db's throwaway cluster
)
bench=(
  # the etcd and Redis comparisons, wrk as a second load generator, gnuplot for the plots
  etcd-server etcd-client redis-server redis-tools wrk gnuplot-nox curl procps
)

profiles=("$@")
((${#profiles[@]})) || profiles=(all)
packages=("${build[@]}")
for p in "${profiles[@]}"; do
  case $p in
    build) ;;
    test) packages+=("${test[@]}") ;;
    bench) packages+=("${bench[@]}") ;;
    all) packages+=("${test[@]}" "${bench[@]}") ;;
    *) echo "install-deps: unknown profile '$p' (build, test, bench, all)" >&2; exit 2 ;;
  esac
done
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | awk '!seen[$0]++')

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
