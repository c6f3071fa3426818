#!/bin/sh
# Hunts for the secret named $1 in every environment it can read: the
# parent's (/proc/$PPID/environ) and every process's (/proc/*/environ).
# Prints what it saw of its parent and every file that holds the secret.
echo "ppid=$PPID"
if cat "/proc/$PPID/environ" 2>/dev/null | tr '\0' '\n' | grep -q "$1"; then
    echo "parent-environ: secret found"
fi
grep -a -l "$1" /proc/[0-9]*/environ 2>/dev/null | sed 's/^/secret in /'
echo done
