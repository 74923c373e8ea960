#!/bin/sh
# gpuctl installer (docs/releasing.md): downloads the release archive for this machine, checks its
# SHA-256 against the release's checksum, and installs `gpuctl` (and, with --kubectl-plugin, the
# `kubectl-gpuctl` link that makes it `kubectl gpuctl`).
#
#   curl --proto '=https' --tlsv1.2 -fsSL https://github.com/ORG/gpuctl/releases/download/vX.Y.Z/gpuctl-installer.sh | sh
#   sh gpuctl-installer.sh --to /usr/local/bin
#   sh gpuctl-installer.sh --archive gpuctl-x86_64-unknown-linux-gnu.tar.gz --sha256 <64 hex | FILE>
#
# Options: --to DIR (default $HOME/.local/bin), --version vX.Y.Z (default this installer's release,
# or $GPUCTL_VERSION), --base-url URL (where the archives are; default the release's download URL), --archive FILE (install a local archive; its checksum from --sha256, else
# FILE.sha256 beside it), --sha256 HEX|FILE, --kubectl-plugin. Nothing is installed unless the
# checksum matches. POSIX sh; needs tar, gzip and sha256sum or shasum; curl or wget to download.
set -eu

# Filled in by tools/release/manifests for each release.
GPUCTL_INSTALLER_VERSION=${GPUCTL_VERSION:-@VERSION@}
GPUCTL_INSTALLER_RELEASES=@RELEASES@

to=${HOME:-/root}/.local/bin
archive=
want=
plugin=0
version=$GPUCTL_INSTALLER_VERSION
base=

say() { printf 'gpuctl-installer: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --to) to=${2:?--to needs a directory}; shift 2 ;;
    --version) version=${2:?--version needs a value}; shift 2 ;;
    --base-url) base=${2:?--base-url needs a URL}; shift 2 ;;
    --archive) archive=${2:?--archive needs a file}; shift 2 ;;
    --sha256) want=${2:?--sha256 needs a checksum or a file}; shift 2 ;;
    --kubectl-plugin) plugin=1; shift ;;
    -h | --help) sed -n '2,16p' "$0" 2>/dev/null || true; exit 0 ;;
    *) die "unknown option $1 (--help lists them)" ;;
  esac
done
[ -n "$base" ] || base=$GPUCTL_INSTALLER_RELEASES/$version

triple() {
  os=$(uname -s)
  arch=$(uname -m)
  case "$os/$arch" in
    Linux/x86_64 | Linux/amd64) echo x86_64-unknown-linux-gnu ;;
    Linux/aarch64 | Linux/arm64) echo aarch64-unknown-linux-gnu ;;
    Darwin/arm64 | Darwin/aarch64) echo aarch64-apple-darwin ;;
    *) die "no gpuctl release for $os/$arch; build it from source: cargo install --path . --locked" ;;
  esac
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    die "neither sha256sum nor shasum is installed: cannot check the archive"
  fi
}

fetch() { # URL FILE
  if command -v curl >/dev/null 2>&1; then
    curl --proto '=https' --tlsv1.2 -fsSL "$1" -o "$2" || die "cannot download $1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q --https-only -O "$2" "$1" || die "cannot download $1"
  else
    die "neither curl nor wget is installed"
  fi
}

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t gpuctl)
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ -z "$archive" ]; then
  case "$base" in
    *@*) die "this installer has no release URL baked in: give --base-url or --archive" ;;
  esac
  name=gpuctl-$(triple).tar.gz
  say "downloading $base/$name"
  fetch "$base/$name" "$tmp/$name"
  [ -n "$want" ] || { fetch "$base/$name.sha256" "$tmp/$name.sha256"; want=$tmp/$name.sha256; }
  archive=$tmp/$name
fi
[ -f "$archive" ] || die "no archive at $archive"
if [ -z "$want" ]; then
  [ -f "$archive.sha256" ] || die "no checksum: give --sha256 HEX|FILE or put $archive.sha256 beside it"
  want=$archive.sha256
fi
if [ -f "$want" ]; then
  want=$(sed -n '1s/^\([0-9a-fA-F]\{64\}\).*/\1/p' "$want")
fi
want=$(printf '%s' "$want" | tr 'A-F' 'a-f')
case "$want" in
  *[!0-9a-f]* | '') die "the expected checksum is not 64 hex digits" ;;
esac
[ ${#want} -eq 64 ] || die "the expected checksum is not 64 hex digits"
got=$(sha256_of "$archive")
if [ "$got" != "$want" ]; then
  die "checksum mismatch for $archive: expected $want, got $got; nothing was installed"
fi
say "checksum OK ($got)"

mkdir "$tmp/x"
gzip -dc "$archive" | (cd "$tmp/x" && tar -xf -) || die "cannot unpack $archive"
bin=$(find "$tmp/x" -type f -name gpuctl | head -n 1)
[ -n "$bin" ] || die "the archive holds no gpuctl binary"
mkdir -p "$to"
cp "$bin" "$to/gpuctl.tmp.$$"
chmod 0755 "$to/gpuctl.tmp.$$"
mv -f "$to/gpuctl.tmp.$$" "$to/gpuctl"
if [ "$plugin" = 1 ]; then
  ln -sf gpuctl "$to/kubectl-gpuctl"
  say "installed $to/kubectl-gpuctl -> gpuctl (kubectl gpuctl)"
fi
say "installed $to/gpuctl ($("$to/gpuctl" version 2>/dev/null || echo 'version unknown'))"
case ":${PATH:-}:" in
  *":$to:"*) ;;
  *) say "add $to to PATH to run gpuctl" ;;
esac
