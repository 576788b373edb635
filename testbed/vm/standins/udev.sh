#!/bin/sh
# testbed's stand-in for udevd and udevadm in a VM-tier guest (testbed.vm.lean_boot.standin_binds).
# virtme-ng-init runs `udevd --daemon`, then `udevadm trigger` and `udevadm settle`; a guest
# needs only the virtio-serial port links that carry the command's input and output.
[ "$1" = "--daemon" ] || exit 0
mkdir -p /dev/virtio-ports
i=0
while [ "$i" -lt 500 ]; do
  for p in /sys/class/virtio-ports/vport*; do
    [ -r "$p/name" ] || continue
    n=; read -r n < "$p/name" || :
    [ -n "$n" ] && [ ! -e "/dev/virtio-ports/$n" ] && ln -s "../${p##*/}" "/dev/virtio-ports/$n"
  done
  [ -e /dev/virtio-ports/virtme.stdin ] && [ -e /dev/virtio-ports/virtme.dev_stderr ] && exit 0
  sleep 0.01
  i=$((i + 1))
done
echo "testbed: the guest's virtio-serial ports never appeared" >&2
exit 0
