#!/usr/bin/env bash
# Provides Node <major> for `make`: unless the `node` on PATH is already that major, unpacks the
# Node release of npm's node-linux-<arch> package (the official binary and its headers, the ones
# node-gyp builds against) into <dir>, whose bin/ the Makefile puts first on PATH. npm and npx
# run on whichever node is first on PATH, so any installed npm fetches and then uses it.
# Usage: scripts/node-dist.sh MAJOR DIR      e.g. scripts/node-dist.sh 24 .tools/node-24
# A second run is a no-op; remove DIR for the newest release of that major.
set -euo pipefail
major=${1:?usage: node-dist.sh MAJOR DIR}
dir=${2:?usage: node-dist.sh MAJOR DIR}
log() { echo "node-dist: $*" >&2; }

[[ $major =~ ^[0-9]+$ ]] || { log "MAJOR must be a Node major version such as 22, not '$major'"; exit 2; }
if [ -x "$dir/bin/node" ]; then exit 0; fi
if command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" = "$major" ]; then exit 0; fi
command -v npm >/dev/null || { log "needs npm (of any Node version) to fetch Node $major"; exit 1; }
[ "$(uname -s)" = Linux ] || { log "fetches Linux builds only; install Node $major yourself"; exit 1; }
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) log "no node-linux package for $(uname -m); install Node $major yourself"; exit 1 ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/node-dist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-linux-$arch@$major" >/dev/null)
mkdir -p "$tmp/unpacked"
tar -xzf "$tmp"/node-linux-*.tgz -C "$tmp/unpacked" --strip-components=1 package/bin/node package/include
mkdir -p "$(dirname "$dir")"
rm -rf "$dir" && mv "$tmp/unpacked" "$dir"
log "Node $("$dir/bin/node" --version) in $dir"
