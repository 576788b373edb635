#!/bin/sh
# testbed's stand-in for systemd-tmpfiles in a VM-tier guest: the run-time folders programs
# expect on a fresh /run (testbed.vm.lean_boot.standin_binds)
mkdir -p /run/lock /run/user
chmod 1777 /run/lock
exit 0
