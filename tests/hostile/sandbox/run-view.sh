#!/bin/sh
# What it tries (issue 22, acceptance 2): to see what an earlier run left.
# `run-view.sh GO` lists the names in $TMPDIR, /dev/shm and /tmp, the Unix
# socket names of its network namespace (/proc/net/unix, abstract names
# included) and the SysV segments of its IPC namespace, each after a
# `== <place>` line, then waits (at most 10 s) for the file GO, which the
# test makes once it has read this run's cgroup charge from outside.
echo "== tmpdir"; ls -a "${TMPDIR:-/tmp}"
echo "== shm"; ls -a /dev/shm
echo "== tmp"; ls -a /tmp
echo "== unix"; cat /proc/net/unix
echo "== sysv"; cat /proc/sysvipc/shm
echo "== end"
waited=0
while [ ! -e "$1" ] && [ "$waited" -lt 200 ]; do
  sleep 0.05
  waited=$((waited + 1))
done
