#!/usr/bin/env bash
# Installs llama.cpp's OpenAI-compatible `llama-server` without compiling:
# Debian's `llama.cpp-tools` package from the unstable suite, inside a
# minimal sid chroot (the package needs a newer libc than Debian 12).
# Needs root and a Debian mirror. Idempotent: a finished chroot is reused.
#
#   bench/llama-server/setup.sh [CHROOT_DIR]     (default /opt/verifine-sid)
#
# Then run the server with bench/llama-server/serve.sh MODEL.gguf PORT.
set -euo pipefail

root="${1:-/opt/verifine-sid}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ -x "$root/usr/bin/llama-server" ]; then
    echo "llama-server already installed in $root"
    exit 0
fi
command -v debootstrap >/dev/null || apt-get install -y debootstrap
if [ ! -x "$root/usr/bin/apt-get" ]; then
    debootstrap --variant=minbase sid "$root" "$mirror"
fi
# The mirror's unstable Release file may be past its Valid-Until date.
chroot "$root" apt-get -o Acquire::Check-Valid-Until=false update
chroot "$root" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o Acquire::Check-Valid-Until=false install -y --no-install-recommends llama.cpp-tools
test -x "$root/usr/bin/llama-server"
echo "llama-server installed in $root"
