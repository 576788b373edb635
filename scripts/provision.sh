#!/usr/bin/env bash
# Provision a Debian 12 machine for testbed (README setup, .ci/run and the Vagrantfile all run
# this one script): packages, the Jool module for the stock kernel, and the project's .venv.
# Idempotent; quick when everything is already there.  Run as root from anywhere:
#     sudo scripts/provision.sh
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# Vagrant copies this script elsewhere before running it, so it says where the tree is.
ROOT="${TESTBED_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
PACKAGES=(
    iperf3 tayga isatapd radvd jool-tools jool-dkms dkms
    linux-image-amd64 linux-headers-amd64 qemu-system-x86 busybox-static
    unbound tcpdump nftables iproute2 iputils-ping procps kmod ethtool
    dnsmasq-base isc-dhcp-client
    python3-venv python3-pip
)
say() { printf 'provision: %s\n' "$*"; }

# A machine that boots a Debian kernel itself (a VM such as the Vagrant box) needs the headers of
# the kernel it RUNS for the Jool module — linux-headers-amd64 is the newest, which a box may not
# run yet. A container (CI, this project's machines) runs its host's kernel: nothing to build.
running=$(uname -r)
own_kernel=false
if [ -e "/boot/vmlinuz-$running" ] || apt-cache show "linux-image-$running" >/dev/null 2>&1; then
    own_kernel=true
    PACKAGES+=("linux-headers-$running")
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "provision: run as root (sudo $0)" >&2
    exit 1
fi

# 1. packages: apt-get update only when something is missing
missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    say "all ${#PACKAGES[@]} packages present"
fi

# 2. the Jool module, built by DKMS for every installed stock kernel that has its headers
for image in /boot/vmlinuz-*-amd64; do
    [ -e "$image" ] || continue
    kver="${image#/boot/vmlinuz-}"
    if [ ! -d "/lib/modules/$kver/build" ]; then
        say "kernel $kver: no headers (linux-headers-$kver), cannot build jool for it"
        continue
    fi
    if dkms status -k "$kver" 2>/dev/null | grep -q "^jool.*: installed"; then
        say "kernel $kver: jool module installed"
    else
        say "kernel $kver: building the jool module"
        dkms autoinstall -k "$kver"
        dkms status -k "$kver" | grep -q "^jool.*: installed" \
            || { echo "provision: jool did not build for $kver (see dkms output)" >&2; exit 1; }
    fi
done

# the kernel this machine runs must have the module (a VM that boots its own kernel)
if $own_kernel; then
    if ! dkms status -k "$running" 2>/dev/null | grep -q "^jool.*: installed"; then
        echo "provision: the jool module did not build for the running kernel $running" \
             "(linux-headers-$running: see the dkms output above)" >&2
        exit 1
    fi
    newest=$(ls /boot/vmlinuz-*-amd64 2>/dev/null | sed 's#/boot/vmlinuz-##' | sort -V | tail -1)
    if [ -n "$newest" ] && [ "$newest" != "$running" ]; then
        say "kernel $newest is installed but $running runs: reboot to use it (both have jool)"
    fi
fi

# 3. the project's virtual environment (with virtme-ng for the full-kernel tier)
cd "$ROOT"
if [ ! -x .venv/bin/python ]; then
    say "creating .venv"
    python3 -m venv .venv
fi
stamp=.venv/.provisioned
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! .venv/bin/python -c "import testbed, pytest, virtme_ng, distributed" 2>/dev/null; then
    say "installing the project into .venv"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e '.[dev,cluster]' virtme-ng
    touch "$stamp"
else
    say ".venv up to date"
fi

# 4. what works now, natively or through the full-kernel tier
.venv/bin/testbed doctor || true
say "done"
