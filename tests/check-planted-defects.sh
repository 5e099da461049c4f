#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# batond holds no planted defect (server/src/planted_defects.hpp; docs/design.md, "Planted defects only in
# the simulation's build"). Usage: check-planted-defects.sh SOURCE_DIR BATOND BATON_SIM PLANTED_SOURCES, the
# last a CMake list (a;b;c) of the server sources tests/sim/CMakeLists.txt compiles again for the
# simulation. batond's build cannot read a switch (there BATON_PLANTED(flag) is `false`, and `planted` is
# not declared); what this checks is that nothing brings one back another way:
#  - the sources: the code under server/src names no switch, nor the switches' struct or variable, outside
#    BATON_PLANTED(...) and planted_defects.hpp (comments aside): no member, option or setter for them;
#  - no header under server/src but planted_defects.hpp uses BATON_PLANTED (the types and the inline code
#    must be the same in both builds), and each source that does is one of PLANTED_SOURCES (else its switch
#    would be dead in the simulation too);
#  - the binaries: batond has no symbol of the switches (it would, were BATON_PLANTED_DEFECTS defined for
#    it), and its symbols can be read (they name the lock service); the simulation's have the switches'
#    (`baton::server::planted`), so the pattern is the right one.
set -euo pipefail
root=${1:?usage: check-planted-defects.sh SOURCE_DIR BATOND BATON_SIM PLANTED_SOURCES}
batond=${2:?} sim=${3:?} planted=${4:?}
failed=0
fail() {
  echo "check-planted-defects: $*" >&2
  failed=1
}

names='planted|planted_defects|renew_before_durable|release_by_key|cut_at_damaged_record|ignore_batch_frames'
names+='|shorten_lease|shorten_lease_|permit_past_count|permit_past_count_|plant|plant_shorten_lease'
names+='|plant_permit_past_count|defects|defects_'
for f in "$root"/server/src/*.hpp "$root"/server/src/*.cpp; do
  [[ $(basename "$f") == planted_defects.hpp ]] && continue
  if hits=$(sed -E -e 's://.*$::' -e 's/BATON_PLANTED\([a-z_]+\)//g' -e '/#include "planted_defects.hpp"/d' "$f" |
    grep -nwE "$names"); then
    fail "server/src/$(basename "$f") names a planted defect outside BATON_PLANTED(...):"$'\n'"$hits"
  fi
done

mapfile -t users < <(cd "$root/server/src" && grep -l 'BATON_PLANTED' -- *.hpp *.cpp | sort)
((${#users[@]} > 0)) || fail "no source under server/src uses BATON_PLANTED: the pattern is wrong"
IFS=';' read -r -a listed <<<"$planted"
for f in "${users[@]}"; do
  case $f in
  planted_defects.hpp) ;;
  *.hpp) fail "server/src/$f uses BATON_PLANTED: only .cpp files may (planted_defects.hpp says why)" ;;
  *)
    found=0
    for l in "${listed[@]}"; do [[ $(basename "$l") == "$f" ]] && found=1; done
    ((found)) || fail "server/src/$f uses BATON_PLANTED but tests/sim/CMakeLists.txt does not compile it again"
    ;;
  esac
done

# Mangled names (demangling a Debug batond's symbols takes seconds): _ZN5baton6server7plantedE is
# baton::server::planted, ...12lock_service5renew... lock_service::renew.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm "$batond" >"$tmp/batond" 2>/dev/null || true
nm "$sim" >"$tmp/sim" 2>/dev/null || true
grep -q '12lock_service5renew' "$tmp/batond" ||
  fail "$batond: no symbol names lock_service::renew (stripped?); cannot tell what it holds"
if leaks=$(grep -iE 'planted|plant_' "$tmp/batond"); then
  fail "$batond holds planted defects:"$'\n'"$leaks"
fi
grep -q '_ZN5baton6server7plantedE' "$tmp/sim" ||
  fail "$sim: no symbol names baton::server::planted; the pattern no longer finds the switches"

((failed == 0)) && echo "check-planted-defects: batond holds no planted defect (${#users[@]} files use BATON_PLANTED)"
exit "$failed"
