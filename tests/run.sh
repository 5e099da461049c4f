#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test command, and all that CI checks (.ci/run calls it). Installs what is missing, then:
#  1. builds the `dev` preset (Debug) and runs there the tests listed in $debug_only below;
#  2. builds the `asan` preset (AddressSanitizer + UndefinedBehaviorSanitizer) and runs every other test there;
#  3. builds the libFuzzer targets (`fuzz` preset, clang) and runs each for a short time from its seed corpus
#     (tests/fuzz/run.sh; BATON_FUZZ_SECONDS per target, default 12).
# Each test runs once: the sanitizer build runs the same code and checks more, so running a test in both builds
# would only spend CI's time budget twice. Exits non-zero on any failure. `bash tests/run.sh --quick` runs the
# whole suite in the Debug build only and stops there.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [[ ${1:-} == --quick ]]; then quick=1; fi

# Run in the Debug build only. test_deploy_files compares the binaries' shared libraries with the Docker
# runtime images, which ship the release build; the sanitizer build links differently. The chaos checker's
# self-tests (they prove the checker sees planted violations, not the code) and the second and both etcd chaos
# runs (real-time runs of fixed length; one seed runs the same binaries under the sanitizers); the
# simulation's self-tests and margin cases (the same code runs under the sanitizers in sim_seeds). The
# packaging, licence-header and format checks (test_debs, test_man_pages_makefiles, test_spdx_headers and its
# _outside_git check, test_format) look at files, not at code paths; the load generator's unit test
# (test_bench_core) because the sanitizer build does not build the benchmarks; the installed variant of the
# SDK is not built under the sanitizers (CMakeLists.txt), so test_package, which installs it, is here.
# test_conformance, test_etcd_cluster, test_etcd_disk_stall, test_etcd_mutex (etcdctl against Baton) and
# test_agent (three agents failing over) spend their time waiting out real TTLs and elections, and are not
# built under the sanitizers (tests/CMakeLists.txt); the code they drive runs under the sanitizers in
# test_batond, test_http_lease, test_etcd_backend, test_agent_jobs, test_agent_failures, test_agent_cli and
# the chaos run.
debug_only='^(test_deploy_files|test_debs|test_man_pages_makefiles|test_spdx_headers|test_spdx_headers_outside_git|test_format|test_package|test_bench_core|test_conformance|test_etcd_cluster|test_etcd_disk_stall|test_etcd_mutex|test_agent|chaos_selftest_.*|chaos_short_seed_2|chaos_short_etcd|chaos_short_etcd_cluster|sim_finds_.*|sim_margin_.*)$'

bash deploy/install-deps.sh test
# The Debug build makes the programs and, unless --quick, only the test programs of $debug_only: the others
# would not run here (BATON_TEST_SET, tests/CMakeLists.txt).
if ((quick)); then
  cmake --preset dev -DBATON_TEST_SET=all
else
  cmake --preset dev -DBATON_TEST_SET=debug-only
fi
cmake --build --preset dev
if ((quick)); then
  ctest --preset dev -L unit -j2
  ctest --preset dev -LE unit -j2
  exit 0
fi
# Two tests at a time: they are built for a loaded 2-core machine, and most of the integration tests' time is
# spent waiting out real TTLs and elections. The chaos runs and test_package (a build) run alone (RUN_SERIAL).
ctest --preset dev -L unit -j2 -R "$debug_only"
ctest --preset dev -LE unit -j2 -R "$debug_only"

# A sanitizer report fails the test that triggers it (UBSan only prints by default); batond and the other
# processes the tests start inherit this.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cmake --preset asan -DBATON_TEST_SET=all
cmake --build --preset asan
ctest --preset asan -L unit -j2 -E "$debug_only"
ctest --preset asan -LE unit -j2 -E "$debug_only"

cmake --preset fuzz
cmake --build --preset fuzz
bash tests/fuzz/run.sh "${BATON_FUZZ_SECONDS:-12}"
