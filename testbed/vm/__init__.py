"""The full-kernel tier: a stock kernel booted under QEMU with virtme-ng (docs/vm.md).

Nothing is imported here: each name has one home, reached as `testbed.vm.MODULE.NAME`.
- `run`: `vm_available()`, `run_in_vm()` (the entry points), `host_db`, `merge_results`;
- `boot`: one boot (`boot`, `VmResult`): vng/QEMU in a process group, output teed, stopped;
- `guest`: `VmSpec`, the guest script, the vng argv, `ENV_IN_VM`, the guest's modules;
- `kernel`: the kernel (lookup, release, the uncompressed PVH copy in the cache), vng, QEMU;
- `accel`: KVM or TCG (the probe, a KVM hang remembered until the host reboots);
- `memory`: `--memory` and the host's free memory;
- `clock`: real or virtual (`-icount`), what the guest is told of it, the vCPU count;
- `lean_boot`: stand-ins for the guest's udev and tmpfiles (`standins/*.sh`), bound by
  `mountns` (run as `python -m testbed.vm.mountns`) in QEMU's own mount namespace.
"""
