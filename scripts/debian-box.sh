#!/usr/bin/env bash
# The Vagrant box's path, checked without Vagrant: debootstrap Debian 12 into an ext4 image, boot
# it under QEMU on its OWN stock kernel (KVM when /dev/kvm works, else TCG), share a copy of this
# tree two-way at /vagrant (virtio-9p, read-write), and inside run what `vagrant up` runs
# (TESTBED_ROOT=/vagrant scripts/provision.sh), check `modprobe jool`, run the smoke experiment
# the NAT64 lab's commands and `testbed lab check ipv6-header-cost`, then power off. The guest's results and logs are read back from
# the share on the host and copied to results/debian-box/. Separate from CI (it takes minutes).
#     sudo scripts/debian-box.sh [--workdir DIR] [--keep] [--lab-full] [--mirror URL]
#   --workdir DIR  where the image, the share and the logs live (default /var/tmp/testbed-debian-box)
#   --keep         keep the image and the share (with its .venv) for a quicker rerun
#   --lab-full     also run the lab's section 3 (testbed run experiments/transition.toml --quick)
#   --mirror URL   Debian mirror (default: the one this machine's apt sources use)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK=/var/tmp/testbed-debian-box
KEEP=false
LAB_FULL=0
MIRROR=""
SIZE=12G
GUEST_TIMEOUT=${DEBIAN_BOX_TIMEOUT:-}   # seconds the guest may run (default: 1.5 h under KVM, 4 h under TCG)

while [ $# -gt 0 ]; do
    case "$1" in
        --workdir) WORK="$2"; shift 2 ;;
        --keep) KEEP=true; shift ;;
        --lab-full) LAB_FULL=1; shift ;;
        --mirror) MIRROR="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "debian-box: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

START=$(date +%s)
say() {
    local t=$(( $(date +%s) - START ))
    printf '[debian-box %02d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*"
}
die() { say "FAILED: $*" >&2; exit 1; }

PHASE_NAME=""; PHASE_START=0
TIMES=()
phase() {   # phase NAME: close the previous phase (recording its wall time), open NAME
    local now; now=$(date +%s)
    if [ -n "$PHASE_NAME" ]; then
        TIMES+=("$(printf '%-28s %4d s' "$PHASE_NAME" $((now - PHASE_START)))")
    fi
    PHASE_NAME="$1"; PHASE_START=$now
    [ -n "$1" ] && say "== $1"
    return 0
}

[ "$(id -u)" -eq 0 ] || { echo "debian-box: run as root (sudo $0)" >&2; exit 1; }

IMG="$WORK/debian12.ext4"
MNT="$WORK/mnt"
SHARE="$WORK/vagrant"          # shared read-write at /vagrant in the guest
BOX="$SHARE/.debian-box"       # the guest's check script, log, phase times and exit status
SERIAL="$WORK/serial.log"
LOOP=""
QEMU_PID=""

cleanup() {
    local rc=$?
    set +e
    if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
        say "stopping QEMU (pid $QEMU_PID)"
        kill "$QEMU_PID"; sleep 2; kill -9 "$QEMU_PID" 2>/dev/null
    fi
    if mountpoint -q "$MNT" 2>/dev/null; then umount -R "$MNT" || umount -lR "$MNT"; fi
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
    if ! $KEEP && [ -d "$WORK" ]; then
        say "removing $WORK (--keep keeps it)"
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need() {   # need COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 || MISSING+=("$2")
}
MISSING=()
need debootstrap debootstrap
need qemu-system-x86_64 qemu-system-x86
need mkfs.ext4 e2fsprogs
need losetup mount
if [ "${#MISSING[@]}" -gt 0 ]; then
    say "installing ${MISSING[*]}"
    apt-get install -y -q --no-install-recommends "${MISSING[@]}" >/dev/null
fi

# the mirror this machine's apt uses (deb822 .sources or one-line sources.list)
if [ -z "$MIRROR" ]; then
    MIRROR=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' | grep -v -- '-security' \
        | grep '/debian/*$' | head -1 || true)
fi
if [ -z "$MIRROR" ]; then
    MIRROR=$(grep -hE '^deb[[:space:]]' /etc/apt/sources.list 2>/dev/null \
        | awk '{print $2}' | grep -v -- '-security' | grep '/debian/*$' | head -1 || true)
fi
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
MIRROR="${MIRROR%/}"
SECURITY="${MIRROR%/debian}/debian-security"

# KVM when QEMU can really use it: /dev/kvm alone is not enough (nested KVM may refuse an MSR of
# `-cpu host` — then without arch-capabilities — or hang the boot: then TCG, see boot_guest)
kvm_probe() {   # kvm_probe CPU: QEMU starts a KVM vCPU with that model and quits
    echo quit | timeout 20 qemu-system-x86_64 -accel kvm -cpu "$1" -display none -nodefaults \
        -no-reboot -m 64 -S -monitor stdio >/dev/null 2>&1
}
ACCEL=(-accel tcg -cpu max); ACCEL_NAME="TCG (software emulation)"
if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    for cpu in host host,-arch-capabilities; do
        if kvm_probe "$cpu" 2>/dev/null; then ACCEL=(-accel kvm -cpu "$cpu"); ACCEL_NAME="KVM (-cpu $cpu)"; break; fi
    done
fi
# a first provision under TCG took 9,136 s (apt, two DKMS builds of Jool) and the whole guest
# 10,036 s: a default that stops it sooner would throw a passing run away
if [ -z "$GUEST_TIMEOUT" ]; then
    if [ "${ACCEL[1]}" = kvm ]; then GUEST_TIMEOUT=5400; else GUEST_TIMEOUT=14400; fi
fi
say "work dir $WORK, mirror $MIRROR, accelerator $ACCEL_NAME, guest time limit ${GUEST_TIMEOUT}s"
mkdir -p "$WORK" "$MNT"

# 1. the image: Debian 12 with its stock kernel, DHCP, root on the serial console, a one-shot check
if [ -f "$IMG" ] && [ -f "$WORK/vmlinuz" ] && [ -f "$WORK/initrd.img" ]; then
    phase "image (kept, reused)"
else
    phase "debootstrap + image"
    rm -f "$IMG"
    truncate -s "$SIZE" "$IMG"
    mkfs.ext4 -q -F -L testbed "$IMG"
    LOOP=$(losetup --find --show "$IMG")
    mount "$LOOP" "$MNT"
    say "debootstrap bookworm into $IMG ($SIZE) — a few minutes"
    debootstrap --include=linux-image-amd64,systemd-sysv,dbus,sudo,ca-certificates,kmod,iproute2 \
        bookworm "$MNT" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
        || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap (log: $WORK/debootstrap.log)"; }
    # a Vagrant box's apt sources: the point release, updates and security (whose kernel may be
    # newer than the one this image runs — the case provision.sh must handle)
    cat > "$MNT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOF
    echo testbed > "$MNT/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 testbed\n::1 localhost ip6-localhost\n' > "$MNT/etc/hosts"
    printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' > "$MNT/etc/fstab"
    printf 'nameserver 10.0.2.3\n' > "$MNT/etc/resolv.conf"     # QEMU user networking's DNS
    # behind a TLS-inspecting proxy the guest needs the CAs this machine trusts, or pip fails
    # (CERTIFICATE_VERIFY_FAILED, after two hours of provisioning under TCG): the local CAs,
    # and pip told to use the system bundle (its own certifi bundle lacks them)
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        mkdir -p "$MNT/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$MNT/usr/local/share/ca-certificates/"
        chroot "$MNT" update-ca-certificates >/dev/null 2>&1 \
            || die "update-ca-certificates in the image"
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$MNT/etc/pip.conf"
        say "this machine's local CAs copied into the image ($(ls /usr/local/share/ca-certificates/*.crt | wc -l)), pip pointed at the system bundle"
    fi
    cat > "$MNT/etc/systemd/network/50-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=yes
EOF
    chroot "$MNT" systemctl enable systemd-networkd.service >/dev/null 2>&1
    chroot "$MNT" passwd -d root >/dev/null
    mkdir -p "$MNT/etc/systemd/system/serial-getty@ttyS0.service.d"
    cat > "$MNT/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf" <<'EOF'
[Service]
ExecStart=
ExecStart=-/sbin/agetty --autologin root --keep-baud 115200,57600,38400,9600 %I $TERM
EOF
    # the one-shot unit: mount the share, run its check script, log to serial + share, power off
    cat > "$MNT/usr/local/sbin/testbed-box-check" <<'EOF'
#!/bin/bash
modprobe 9pnet_virtio 2>/dev/null
mkdir -p /vagrant
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,cache=mmap,rw vagrant /vagrant \
    || { echo "testbed-box: cannot mount the share at /vagrant" > /dev/ttyS0; systemctl poweroff; exit 1; }
rc=0
bash /vagrant/.debian-box/check.sh > >(tee /vagrant/.debian-box/guest.log > /dev/ttyS0) 2>&1 || rc=$?
sleep 1
echo "$rc" > /vagrant/.debian-box/rc
sync
echo "testbed-box: check finished rc=$rc, powering off" > /dev/ttyS0
systemctl poweroff
EOF
    chmod +x "$MNT/usr/local/sbin/testbed-box-check"
    cat > "$MNT/etc/systemd/system/testbed-box-check.service" <<'EOF'
[Unit]
Description=testbed: provision and check through the /vagrant share, then power off
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/testbed-box-check
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF
    chroot "$MNT" systemctl enable testbed-box-check.service systemd-networkd-wait-online.service \
        >/dev/null 2>&1
    kver=$(ls "$MNT"/boot/vmlinuz-* | sed 's#.*/vmlinuz-##' | sort -V | tail -1)
    [ -n "$kver" ] || die "no kernel in the image"
    cp "$MNT/boot/vmlinuz-$kver" "$WORK/vmlinuz"
    cp "$MNT/boot/initrd.img-$kver" "$WORK/initrd.img"
    echo "$kver" > "$WORK/kernel-version"
    umount -R "$MNT"
    losetup -d "$LOOP"; LOOP=""
    say "image ready: $(du -sh --apparent-size "$IMG" | cut -f1) sparse, kernel $kver"
fi

# 2. the share: a copy of this tree (tracked and untracked, not ignored, no .venv — as the
#    Vagrantfile shares it), read-write so that what the guest writes is on the host
phase "share the tree"
mkdir -p "$SHARE" "$BOX"
(cd "$REPO" && git ls-files -z -co --exclude-standard | grep -zv '^\.venv$' \
    | tar --null -T - -cf -) | tar -xf - -C "$SHARE"
rm -f "$BOX/rc" "$BOX/guest.log" "$BOX/times"
cat > "$BOX/check.sh" <<EOF
#!/bin/bash
# written by scripts/debian-box.sh: what the Vagrant box runs, then the smoke run and a lab
set -euo pipefail
LAB_FULL=$LAB_FULL
EOF
cat >> "$BOX/check.sh" <<'EOF'
START=$(date +%s); PHASE=""; PSTART=$START
say() { local t=$(( $(date +%s) - START )); printf '[guest %02d:%02d] %s\n' $((t/60)) $((t%60)) "$*"; }
phase() {
    local now; now=$(date +%s)
    [ -n "$PHASE" ] && printf '%-28s %4d s\n' "guest: $PHASE" $((now - PSTART)) >> /vagrant/.debian-box/times
    PHASE="$1"; PSTART=$now
    if [ -n "$1" ]; then say "== $1"; fi
}
trap 'phase ""' EXIT
say "kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB"
ip -br addr

phase "provision.sh"
# as the Vagrantfile's shell provisioner: a copy of the script elsewhere, TESTBED_ROOT=/vagrant
cp /vagrant/scripts/provision.sh /tmp/vagrant-shell
chmod +x /tmp/vagrant-shell
TESTBED_ROOT=/vagrant /tmp/vagrant-shell

phase "modprobe jool"
modprobe jool
lsmod | grep -E '^jool' || { say "jool is not loaded"; exit 1; }
say "jool loaded: $(modinfo -F version jool) for $(uname -r)"
modprobe -r jool || true

cd /vagrant
T=.venv/bin/testbed
phase "smoke experiment"
$T run experiments/smoke.toml --quick
$T results show smoke

phase "lab nat64-tayga-vs-jool, sections 1-2"
# labs/nat64-tayga-vs-jool.md runs on the virtual clock in a guest (`testbed lab check` boots
# one); here the box IS the full kernel, so its NAT64 commands run on it directly: Jool on the
# stock kernel, the model, a ping through the translator
$T model throughput --ip 6 --payload 1000 --rate ethernet --mechanism nat64
$T model owd --ip 6 --payload 1000 --rate ethernet --routers 1 --mechanism nat64
$T model owd --ip 6 --payload 1000 --rate ethernet --routers 1
$T up topologies/one-router.toml --set rate=ethernet --name lab3
trap '$T down --name lab3 || true; phase ""' EXIT
$T show --name lab3
$T exec --name lab3 r1 -- modprobe jool
$T exec --name lab3 r1 -- jool instance add lab --netfilter --pool6 64:ff9b::/96
h2v4=$($T exec --name lab3 h2 -- ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
say "h2's IPv4 address: $h2v4"
$T exec --name lab3 h1 -- ping -6 -c3 "64:ff9b::$h2v4"
$T exec --name lab3 r1 -- jool -i lab session display --icmp --numeric
$T exec --name lab3 r1 -- jool instance remove lab
if [ "$LAB_FULL" = 1 ]; then
    $T run experiments/transition.toml --quick --clock real
    $T results show
fi
$T down --name lab3
trap 'phase ""' EXIT

phase "lab check ipv6-header-cost"
# a host-tier lab end to end, as a teacher runs it: its script, then its answer key. Under TCG
# every packet costs 10-100x its KVM time, so a measured answer rests on late (suspect) trials
# and is not judged, or falls outside the sheet's range: that is reported; a script that fails
# is a failure
KEYDIR=/vagrant/results/debian-box-lab
rm -rf "$KEYDIR"
if ! $T lab check ipv6-header-cost --keep "$KEYDIR"; then
    [ -f "$KEYDIR/answer-key.json" ] || { say "lab ipv6-header-cost: its script failed"; exit 1; }
    say "lab ipv6-header-cost: the script ran; some answers not judged (the host late) or outside the sheet's ranges (above; TCG is slow)"
fi
phase ""
say "all checks passed"
EOF

# 3. boot the image's own kernel and wait for the one-shot check to power it off
phase "boot + guest checks"
say "booting $(cat "$WORK/kernel-version") under $ACCEL_NAME (serial log: $SERIAL)"
start_qemu() {
    : > "$SERIAL"
    nice -n 19 qemu-system-x86_64 "${ACCEL[@]}" -m 4G -smp 2 -nographic -no-reboot \
        -kernel "$WORK/vmlinuz" -initrd "$WORK/initrd.img" \
        -append "root=/dev/vda rw earlyprintk=ttyS0 console=ttyS0,115200 panic=-1" \
        -drive "file=$IMG,format=raw,if=virtio" \
        -netdev user,id=net0 -device virtio-net-pci,netdev=net0 \
        -virtfs "local,path=$SHARE,mount_tag=vagrant,security_model=passthrough,id=vagrant" \
        -monitor none -serial "file:$SERIAL" < /dev/null > "$WORK/qemu.log" 2>&1 &
    QEMU_PID=$!
}
start_qemu
if [ "${ACCEL[1]}" = kvm ]; then
    # a KVM boot whose kernel has not printed its banner within 60 s hangs: TCG instead
    for _ in $(seq 60); do
        if grep -q 'Linux version' "$SERIAL" || ! kill -0 "$QEMU_PID" 2>/dev/null; then break; fi
        sleep 1
    done
    if ! grep -q 'Linux version' "$SERIAL"; then
        say "the KVM boot hangs or failed (qemu: $(tail -1 "$WORK/qemu.log")); TCG instead"
        kill "$QEMU_PID" 2>/dev/null || true; wait "$QEMU_PID" 2>/dev/null || true
        ACCEL=(-accel tcg -cpu max); ACCEL_NAME="TCG (software emulation)"
        [ -n "${DEBIAN_BOX_TIMEOUT:-}" ] || GUEST_TIMEOUT=14400
        start_qemu
    fi
fi
say "QEMU pid $QEMU_PID under $ACCEL_NAME"
waited=0; shown=0
while kill -0 "$QEMU_PID" 2>/dev/null; do
    sleep 5; waited=$((waited + 5))
    # echo the guest's progress lines as they come
    if [ -f "$BOX/guest.log" ]; then
        total=$(wc -l < "$BOX/guest.log")
        if [ "$total" -gt "$shown" ]; then
            sed -n "$((shown + 1)),${total}p" "$BOX/guest.log" | grep -E '^\[guest|^provision:' || true
            shown=$total
        fi
    fi
    [ "$waited" -lt "$GUEST_TIMEOUT" ] || die "the guest ran past ${GUEST_TIMEOUT}s (serial: $SERIAL)"
done
wait "$QEMU_PID" || true
QEMU_PID=""

# 4. on the host: what the guest wrote through the share
phase "read back"
[ -f "$BOX/rc" ] || { tail -40 "$SERIAL" >&2; die "the guest wrote no exit status (serial log above)"; }
guest_rc=$(cat "$BOX/rc")
OUTDIR="$REPO/results/debian-box"
mkdir -p "$OUTDIR"
say "written by the guest under /vagrant, seen here in $SHARE:"
{ ls -l "$SHARE/results" "$BOX" || true; } | sed "s/^/    /"
cp -r "$SHARE/results/." "$OUTDIR/" 2>/dev/null || true
cp "$BOX/guest.log" "$SERIAL" "$OUTDIR/"
phase ""
{ printf '%s\n' "${TIMES[@]}"; cat "$BOX/times" 2>/dev/null; } | tee "$OUTDIR/times.txt"
say "accelerator $ACCEL_NAME; logs and results copied to $OUTDIR"
[ "$guest_rc" = 0 ] || die "a check failed in the guest (rc $guest_rc; see $OUTDIR/guest.log)"
say "OK: provision.sh, jool, smoke and the lab passed in a booted Debian 12 ($(cat "$WORK/kernel-version"))"
