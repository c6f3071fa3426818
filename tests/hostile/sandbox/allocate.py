#!/usr/bin/env python3
# What it tries: to take disk blocks in a writable root beyond max_file_size
# (RLIMIT_FSIZE) with fallocate modes that allocate past a file's size
# (issue 22, finding 8): FALLOC_FL_KEEP_SIZE (601 MiB held under a 10 MiB
# limit on main), FALLOC_FL_ZERO_RANGE | KEEP_SIZE, and FALLOC_FL_UNSHARE_RANGE
# | KEEP_SIZE, each on a file of its own; then plain fallocate (mode 0) past
# the limit, which RLIMIT_FSIZE bounds.
#
# Usage: allocate.py BYTES; prints "MODE RESULT" per attempt, RESULT "ok" or
# the errno name. The test measures the blocks from outside.
import ctypes
import errno
import os
import signal
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# fallocate on x86_64 (285) and aarch64 (47).
NR_FALLOCATE = 47 if os.uname().machine == "aarch64" else 285
# A file size limit signals SIGXFSZ; the errno (EFBIG) is what the attack reads.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

size = int(sys.argv[1])
ATTEMPTS = [
    ("keep-size", 0x01),
    ("zero-range-keep-size", 0x11),
    ("unshare-range-keep-size", 0x41),
    ("plain", 0x00),
]
for name, mode in ATTEMPTS:
    fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
    result = libc.syscall(
        ctypes.c_long(NR_FALLOCATE),
        ctypes.c_long(fd),
        ctypes.c_long(mode),
        ctypes.c_long(0),
        ctypes.c_long(size),
    )
    code = 0 if result >= 0 else ctypes.get_errno()
    os.close(fd)
    print(name, "ok" if code == 0 else errno.errorcode.get(code, str(code)), flush=True)
