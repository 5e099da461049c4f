#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages of a build tree with `cpack -G DEB` (cmake/Packaging.cmake) into a temporary
# directory and checks each one: its control fields (Version the project's, Depends from the programs'
# libraries), its maintainer script (users from sysusers.d, no useradd), its conffiles, and its files at
# their Debian paths. Then it unpacks them all into a throwaway root and runs each program's --version from
# there, checks that the units start /usr/bin programs as the users the sysusers.d files create, and renders
# each man page. Usage: debs.sh <build dir> <project version>
set -euo pipefail
build_dir=$(cd "$1" && pwd)
version=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "debs: $*" >&2
  exit 1
}

(cd "$build_dir" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log" >&2
  fail "cpack -G DEB failed"
}
arch=$(dpkg --print-architecture)
root=$work/root
mkdir "$root"

# check_package <package> <its files...>: control fields, copyright and files; unpacks it into $root.
check_package() {
  local package=$1
  shift
  local deb=$work/out/${package}_${version}_${arch}.deb
  [[ -f $deb ]] || fail "no $(basename "$deb") among: $(cd "$work/out" && echo *.deb)"
  local field value
  for field in Package Version Architecture Maintainer Section Priority Description Depends; do
    value=$(dpkg-deb -f "$deb" "$field")
    [[ -n $value ]] || fail "$package: no $field"
  done
  [[ $(dpkg-deb -f "$deb" Package) == "$package" ]] || fail "$package: Package is $(dpkg-deb -f "$deb" Package)"
  [[ $(dpkg-deb -f "$deb" Version) == "$version" ]] || fail "$package: Version $(dpkg-deb -f "$deb" Version), not $version"
  [[ $(dpkg-deb -f "$deb" Architecture) == "$arch" ]] || fail "$package: Architecture is not $arch"

  dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' >"$work/$package.files"
  local file
  for file in "/usr/share/doc/$package/copyright" "$@"; do
    grep -qxF "$file" "$work/$package.files" || fail "$package: no $file in the package"
  done
  # Nothing outside the Debian paths, such as /usr/local or /usr/etc.
  if grep -E '^/usr/(local|etc)(/|$)' "$work/$package.files"; then
    fail "$package: files under /usr/local or /usr/etc"
  fi
  dpkg -x "$deb" "$root"
  grep -qx 'License: Apache-2.0' "$root/usr/share/doc/$package/copyright" ||
    fail "$package: the copyright file names no License: Apache-2.0"
  dpkg-deb -e "$deb" "$work/control-$package"
}

# check_program <package> <program> <man section> <unit or ''> <sysusers name or ''> <conffile or ''>
check_program() {
  local package=$1 program=$2 section=$3 unit=$4 sysusers=$5 conffile=$6
  local files=("/usr/bin/$program" "/usr/share/man/man$section/$program.$section.gz")
  [[ -n $unit ]] && files+=("/usr/lib/systemd/system/$unit")
  [[ -n $sysusers ]] && files+=("/usr/lib/sysusers.d/$sysusers")
  [[ -n $conffile ]] && files+=("$conffile")
  check_package "$package" "${files[@]}"
  local control=$work/control-$package

  # The programs' Depends come from dpkg-shlibdeps: every one links the C library.
  [[ $(dpkg-deb -f "$work/out/${package}_${version}_${arch}.deb" Depends) == *libc6* ]] ||
    fail "$package: Depends names no libc6 (dpkg-shlibdeps did not run)"

  local output
  output=$("$root/usr/bin/$program" --version) || fail "$program --version failed"
  [[ $output == *"$version"* ]] || fail "$program --version printed '$output', not $version"

  local page=$root/usr/share/man/man$section/$program.$section.gz
  gzip -dc "$page" | grep -q "^\.TH \"*${program^^}\"* \"*$section\"*" || fail "$page: no .TH header for $program($section)"
  if command -v man >/dev/null; then
    output=$(MANWIDTH=100 man -l "$page" 2>"$work/man.err") || fail "man -l $page failed: $(cat "$work/man.err")"
    for heading in NAME SYNOPSIS DESCRIPTION; do
      grep -q "^$heading" <<<"$output" || fail "$page renders no $heading section"
    done
    grep -q -- '--version' <<<"$output" || fail "$page: no --version in the rendered page"
  fi

  if [[ -n $conffile ]]; then
    grep -qxF "$conffile" "$control/conffiles" || fail "$package: $conffile is not a conffile"
  fi
  if [[ -n $unit ]]; then
    local unit_file=$root/usr/lib/systemd/system/$unit
    local exec
    exec=$(sed -n 's/^ExecStart=//p' "$unit_file")
    [[ $exec == "/usr/bin/$program"* ]] || fail "$unit: ExecStart=$exec does not run /usr/bin/$program"
    if grep -n '/usr/local' "$unit_file"; then
      fail "$unit names /usr/local"
    fi
    local env_file
    while read -r env_file; do
      grep -qxF "$env_file" "$work/$package.files" || fail "$unit reads $env_file, which $package does not ship"
    done < <(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit_file")
    # The user the unit runs as is the one the package's sysusers.d file creates, and postinst creates it
    # with systemd-sysusers, not useradd.
    local user
    user=$(sed -n 's/^User=//p' "$unit_file")
    grep -qE "^u $user " "$root/usr/lib/sysusers.d/$sysusers" || fail "$sysusers does not create $unit's User=$user"
    grep -q "systemd-sysusers .*$sysusers" "$control/postinst" || fail "$package: postinst does not run systemd-sysusers $sysusers"
    if grep -nE 'useradd|adduser|groupadd' "$control/postinst"; then
      fail "$package: postinst adds users itself"
    fi
    [[ -x $control/postinst ]] || fail "$package: postinst is not executable"
  fi
}

check_program batond batond 8 batond.service batond.conf /etc/default/batond
grep -q '^BATOND_OPTS=".*--data-dir /var/lib/baton' "$root/etc/default/batond" ||
  fail "/etc/default/batond sets no BATOND_OPTS with --data-dir /var/lib/baton"
# shellcheck disable=SC2016 # the unit's text, not an expansion
grep -qx 'ExecStart=/usr/bin/batond $BATOND_OPTS' "$root/usr/lib/systemd/system/batond.service" ||
  fail "batond.service does not start batond with \$BATOND_OPTS"
check_program baton-agent baton-agent 8 baton-agent.service baton-agent.conf /etc/baton/agent.yaml
grep -q -- '--config /etc/baton/agent.yaml' "$root/usr/lib/systemd/system/baton-agent.service" ||
  fail "baton-agent.service does not read /etc/baton/agent.yaml"
check_program baton-cli baton 1 '' '' ''

check_package libbaton-dev /usr/include/baton/client.hpp /usr/include/baton/version.hpp \
  /usr/lib/cmake/baton/baton-config.cmake /usr/lib/cmake/baton/baton-config-version.cmake \
  /usr/lib/pkgconfig/baton.pc
grep -qE '^/usr/lib/libbaton\.(a|so)' "$work/libbaton-dev.files" || fail "libbaton-dev: no libbaton.a or libbaton.so"
[[ $(PKG_CONFIG_PATH=$root/usr/lib/pkgconfig pkg-config --modversion baton) == "$version" ]] ||
  fail "libbaton-dev: baton.pc is not version $version"
grep -q "\"$version\"" "$root/usr/include/baton/version.hpp" || fail "libbaton-dev: version.hpp does not say $version"

# systemd accepts the installed units, pointed at the unpacked programs and options file (any message fails).
if command -v systemd-analyze >/dev/null; then
  mkdir "$work/units"
  for unit in batond.service baton-agent.service; do
    sed "s|/usr/bin/|$root/usr/bin/|g; s|^EnvironmentFile=/etc/|EnvironmentFile=$root/etc/|" \
      "$root/usr/lib/systemd/system/$unit" >"$work/units/$unit"
  done
  if ! messages=$(systemd-analyze verify --man=no "$work/units/batond.service" "$work/units/baton-agent.service" 2>&1) ||
    [[ -n $messages ]]; then
    fail "systemd-analyze verify of the installed units: $messages"
  fi
fi

# The users the units run as, created from the sysusers.d files in the unpacked root.
if command -v systemd-sysusers >/dev/null; then
  systemd-sysusers --root="$root" batond.conf baton-agent.conf 2>/dev/null
  for user in baton baton-agent; do
    grep -q "^$user:" "$root/etc/passwd" || fail "systemd-sysusers created no user $user"
  done
fi
echo "debs: $(cd "$work/out" && echo *.deb) built and checked"
