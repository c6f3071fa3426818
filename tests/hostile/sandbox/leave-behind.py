#!/usr/bin/env python3
# What it tries (issue 22, acceptance 2): to leave something of this run for
# the next run on the same executor, or on the host, under every name a run
# can give: `leave-behind.py TAG KEY` writes a file named TAG in $TMPDIR,
# /dev/shm and /tmp (16 MiB in the first two: a tmpfs charge that outlives
# the writer), 16 MiB of page cache (a file TAG.cache written in the working
# directory), a SysV shared memory segment of key KEY, and, held by a daemon
# (double fork, setsid, stdio on /dev/null) that sleeps to outlive the run,
# a Unix stream socket listening on TAG.sock in each of those directories
# and one on the abstract name TAG. Prints `left: <what>` for each thing
# made, `refused: <what> <errno>` for each the sandbox refused.
import ctypes
import errno
import os
import socket
import sys
import time

tag, key = sys.argv[1], int(sys.argv[2])
places = [os.environ.get("TMPDIR", "/tmp"), "/dev/shm", "/tmp"]
MIB = 1 << 20


def attempt(what, action):
    try:
        action()
        print(f"left: {what}", flush=True)
    except OSError as error:
        print(f"refused: {what} {errno.errorcode.get(error.errno, error.errno)}", flush=True)


def writer(path, size):
    def write():
        with open(path, "wb") as file:
            for _ in range(max(size // MIB, 1)):
                file.write(b"\xa5" * min(size, MIB))
    return write


for place in places:
    size = 4096 if place == "/tmp" else 16 * MIB
    attempt(f"file in {place}", writer(os.path.join(place, tag), size))
attempt("page cache", writer(os.path.join(os.getcwd(), tag + ".cache"), 16 * MIB))

libc = ctypes.CDLL(None, use_errno=True)


def segment():
    # IPC_CREAT | 0600
    if libc.shmget(ctypes.c_int(key), ctypes.c_size_t(4096), ctypes.c_int(0o1000 | 0o600)) < 0:
        raise OSError(ctypes.get_errno(), "shmget")


attempt("SysV segment", segment)

read_end, write_end = os.pipe()
if os.fork() == 0:
    os.close(read_end)
    os.setsid()
    if os.fork() == 0:
        held, lines = [], []
        for name in [os.path.join(place, tag + ".sock") for place in places] + ["\0" + tag]:
            shown = "@" + tag if name.startswith("\0") else name
            try:
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(name)
                listener.listen(1)
                held.append(listener)
                lines.append(f"left: socket {shown}")
            except OSError as error:
                lines.append(f"refused: socket {shown} {errno.errorcode.get(error.errno, error.errno)}")
        os.write(write_end, ("\n".join(lines) + "\n").encode())
        os.close(write_end)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        time.sleep(30)
    os._exit(0)
os.close(write_end)
report = b""
while True:
    chunk = os.read(read_end, 4096)
    if not chunk:
        break
    report += chunk
print(report.decode(), end="", flush=True)
