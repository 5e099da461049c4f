#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A throwaway CA and a certificate for batond, for deploy/compose/compose.yaml only. Run it once before
# `docker compose up` (it needs openssl, which deploy/install-deps.sh's `test` profile installs):
#
#   bash deploy/compose/make-tls.sh [--force] [DIR]     (DIR: default deploy/compose/tls, which git ignores)
#
# Writes DIR/ca.crt (what the agents and the host's baton CLI trust), DIR/batond.crt and DIR/batond.key. The
# certificate names batond (the service, for the agents), localhost and 127.0.0.1 (batond's own health check
# and the port published on the host's loopback).
#
# The CA's key is made in a scratch directory and deleted once batond's certificate is signed: no one, not
# even whoever reads DIR, can issue another certificate that the agents would trust. Renewing is making a new
# CA and certificate together: run this again with --force (or wait: it renews by itself within a day of the
# certificate's expiry), then `docker compose restart`: the agents read the CA at start (batond alone would
# take a new certificate on SIGHUP, but not one from a CA its clients do not trust yet).
#
# Existing files that are valid for another day are kept, so running this before every `up` is harmless.
set -euo pipefail

force=0
if [[ ${1-} == --force ]]; then
  force=1
  shift
fi
if (($# > 1)); then
  echo "usage: $0 [--force] [DIR]" >&2
  exit 2
fi
dir=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tls"}

if ! command -v openssl >/dev/null; then
  echo "make-tls: openssl is needed (Debian: apt-get install openssl, or bash deploy/install-deps.sh test)" >&2
  exit 1
fi

if ((!force)) && [[ -f $dir/ca.crt && -f $dir/batond.key ]] \
  && openssl x509 -in "$dir/batond.crt" -noout -checkend 86400 >/dev/null 2>&1 \
  && openssl verify -CAfile "$dir/ca.crt" "$dir/batond.crt" >/dev/null 2>&1 \
  && [[ $(openssl x509 -in "$dir/batond.crt" -noout -pubkey) == \
        $(openssl pkey -in "$dir/batond.key" -pubout) ]]; then
  echo "make-tls: $dir already holds a valid CA and certificate (--force makes new ones)"
  exit 0
fi

# A path Compose created as an empty directory, when `up` ran before this script: root owns it.
for f in ca.crt batond.crt batond.key; do
  if [[ -d $dir/$f ]]; then
    echo "make-tls: $dir/$f is a directory (Compose made it before the certificates existed): remove it" \
      "(sudo rm -r '$dir/$f') and run this again" >&2
    exit 1
  fi
done
mkdir -p "$dir"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# P-256 keys: small, fast handshakes, and accepted by every TLS 1.2/1.3 stack batond and the SDK use.
# Short lifetimes (30 days) because nothing here is meant to outlive a trial.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj /CN=baton-compose-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  -keyout "$scratch/ca.key" -out "$scratch/ca.crt" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=batond \
  -keyout "$scratch/batond.key" -out "$scratch/batond.csr" 2>/dev/null
# Clients check subjectAltName only, never the common name (docs/security.md).
printf '%s\n' 'subjectAltName=DNS:batond,DNS:localhost,IP:127.0.0.1' 'extendedKeyUsage=serverAuth' \
  'keyUsage=critical,digitalSignature' >"$scratch/batond.ext"
openssl x509 -req -days 30 -in "$scratch/batond.csr" -CA "$scratch/ca.crt" -CAkey "$scratch/ca.key" \
  -CAcreateserial -extfile "$scratch/batond.ext" -out "$scratch/batond.crt" 2>/dev/null

# batond runs as uid 10001 in its container, and a bind mount keeps the host's owner (whoever ran this), so
# the key must be readable by others to be readable there. That is acceptable for a key that serves a trial
# on this host only, sits in an ignored directory, and is trusted by nothing but this CA, whose key is gone.
chmod 0644 "$scratch/batond.key"
# An interrupted run may leave a mix of old and new files: the checks above see it and the next run starts over.
mv -f "$scratch/ca.crt" "$dir/ca.crt"
mv -f "$scratch/batond.key" "$dir/batond.key"
mv -f "$scratch/batond.crt" "$dir/batond.crt"
echo "make-tls: wrote $dir/ca.crt, $dir/batond.crt and $dir/batond.key (valid 30 days)"
