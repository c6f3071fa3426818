#!/usr/bin/env python3
# What it tries: the system calls a tool would use to take its sandbox apart
# or reach outside its call: kernel keyrings, new namespaces, mounts, ptrace,
# bpf, clone3, io_uring, vsock, modules, the clock, and privileged file
# operations (mknod, chattr +i, umount of its own /proc).
#
# Usage: syscalls.py PROBE...; prints one line per probe, "PROBE RESULT",
# where RESULT is "ok" or the errno name (EPERM, ENOSYS, ...). Each probe runs
# in a forked child, so that one that succeeds (a new namespace, a changed
# personality) changes nothing for the next. Every probe is harmless when it
# succeeds: its arguments are chosen so that an unfiltered, privileged call
# fails with another errno or changes only the forked child.
import ctypes
import errno
import os
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# x86_64 numbers; aarch64 has other numbers and no probe set here.
NR = {
    "add_key": 248,
    "keyctl": 250,
    "unshare": 272,
    "mount": 165,
    "umount2": 166,
    "setns": 308,
    "ptrace": 101,
    "bpf": 321,
    "perf_event_open": 298,
    "clone3": 435,
    "personality": 135,
    "io_uring_setup": 425,
    "socket": 41,
    "finit_module": 313,
    "clock_settime": 227,
    "process_vm_readv": 310,
    "open_by_handle_at": 304,
    "mknod": 133,
    "ioctl": 16,
    "open": 2,
    "kcmp": 312,
    "userfaultfd": 323,
    # Calls a deny-list let through (issue 22, finding 7): no list names
    # them, so the allow-list refuses them with ENOSYS.
    "modify_ldt": 154,
    "set_mempolicy": 238,
    "statmount": 457,
    "listmount": 458,
    "lsm_list_modules": 461,
    "getxattrat": 464,
    "open_tree_attr": 467,
    "file_setattr": 469,
    "fallocate": 285,
}

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_FILES = 0x00000400
MNT_DETACH = 2
AF_VSOCK = 40
SOCK_STREAM = 1
PTRACE_ATTACH = 16
S_IFCHR = 0o020000
FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_IMMUTABLE_FL = 0x10


def call(name, *args):
    # Variadic arguments: every integer goes as a full 64-bit register.
    args = [ctypes.c_long(arg) if isinstance(arg, int) else arg for arg in args]
    return libc.syscall(ctypes.c_long(NR[name]), *args)


def sibling():
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    return pid


def probe_ptrace():
    target = sibling()
    try:
        return call("ptrace", PTRACE_ATTACH, target, None, None)
    finally:
        os.kill(target, 9)


def probe_chattr():
    # An immutable flag on a file of the private TMPDIR (or the current
    # directory): needs CAP_LINUX_IMMUTABLE. On success it is taken off again.
    directory = os.environ.get("TMPDIR", ".")
    path = os.path.join(directory, "toolsmith-chattr-probe")
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        flags = ctypes.c_long(0)
        if libc.ioctl(fd, FS_IOC_GETFLAGS, ctypes.byref(flags)) != 0:
            return -1
        flags.value |= FS_IMMUTABLE_FL
        result = libc.ioctl(fd, FS_IOC_SETFLAGS, ctypes.byref(flags))
        if result == 0:
            flags.value &= ~FS_IMMUTABLE_FL
            libc.ioctl(fd, FS_IOC_SETFLAGS, ctypes.byref(flags))
        return result
    finally:
        os.close(fd)
        os.unlink(path)


def probe_mknod():
    directory = os.environ.get("TMPDIR", ".")
    path = os.path.join(directory, "toolsmith-mknod-probe").encode()
    # /dev/null's numbers (1, 3): a char device made by the tool.
    result = call("mknod", ctypes.c_char_p(path), S_IFCHR | 0o666, os.makedev(1, 3))
    if result == 0:
        os.unlink(path)
    return result


def probe_fallocate_keep_size():
    # Blocks past the end of a file that its size does not count (issue 22,
    # finding 8): FALLOC_FL_KEEP_SIZE (1). Refused with EOPNOTSUPP by the filter.
    directory = os.environ.get("TMPDIR", ".")
    path = os.path.join(directory, "toolsmith-fallocate-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        return call("fallocate", fd, 1, 0, 4096)
    finally:
        os.close(fd)
        os.unlink(path)


PROBES = {
    # A NULL key type: EFAULT when the call gets through.
    "add_key": lambda: call("add_key", None, None, None, 0, 0),
    # KEYCTL_GET_KEYRING_ID of the session keyring, without creating it.
    "keyctl": lambda: call("keyctl", 0, -3, 0),
    "unshare-user": lambda: call("unshare", CLONE_NEWUSER),
    "unshare-mount": lambda: call("unshare", CLONE_NEWNS),
    "unshare-net": lambda: call("unshare", CLONE_NEWNET),
    # Not a namespace: allowed by the filter.
    "unshare-files": lambda: call("unshare", CLONE_FILES),
    # A remount of a path that does not exist: ENOENT when it gets through.
    "mount": lambda: call("mount", None, ctypes.c_char_p(b"/nonexistent-toolsmith"), None, 0x20, None),
    # A tmpfs over the tool's own /proc (its private mount namespace only).
    "mount-tmpfs": lambda: call("mount", ctypes.c_char_p(b"none"), ctypes.c_char_p(b"/proc"), ctypes.c_char_p(b"tmpfs"), 0, None),
    # The tool's own /proc: gone if it gets through, in its private mount namespace only.
    "umount-proc": lambda: call("umount2", ctypes.c_char_p(b"/proc"), MNT_DETACH),
    "setns": lambda: call("setns", -1, 0),
    "ptrace": probe_ptrace,
    # An unknown command: EINVAL when it gets through.
    "bpf": lambda: call("bpf", 0xFFFF, None, 0),
    "perf_event_open": lambda: call("perf_event_open", None, 0, -1, -1, 0),
    "clone3": lambda: call("clone3", None, 0),
    # READ_IMPLIES_EXEC: not one of the default personalities.
    "personality": lambda: call("personality", 0x0400000),
    "personality-query": lambda: 0 if call("personality", 0xFFFFFFFF) >= 0 else -1,
    "io_uring_setup": lambda: call("io_uring_setup", 0, None),
    "vsock": lambda: call("socket", AF_VSOCK, SOCK_STREAM, 0),
    "finit_module": lambda: call("finit_module", -1, ctypes.c_char_p(b""), 0),
    # CLOCK_MONOTONIC cannot be set: EINVAL when it gets through.
    "clock_settime": lambda: call("clock_settime", 1, None),
    "process_vm_readv": lambda: call("process_vm_readv", os.getpid(), None, 0, None, 0, 0),
    "open_by_handle_at": lambda: call("open_by_handle_at", -1, None, 0),
    "kcmp": lambda: call("kcmp", os.getpid(), os.getpid(), 0, 0, 0),
    "userfaultfd": lambda: call("userfaultfd", 0),
    "mknod": probe_mknod,
    # Each with arguments that make it fail harmlessly (EBADF, EFAULT,
    # EINVAL) or change only the forked child when it gets through.
    "modify_ldt": lambda: call("modify_ldt", 0, None, 0),
    "set_mempolicy": lambda: call("set_mempolicy", 0, None, 0),
    "statmount": lambda: call("statmount", None, None, 0, 0),
    "listmount": lambda: call("listmount", None, None, 0, 0),
    "lsm_list_modules": lambda: call("lsm_list_modules", None, None, 0),
    "getxattrat": lambda: call("getxattrat", -1, None, 0, None, 0),
    "open_tree_attr": lambda: call("open_tree_attr", -1, None, 0, None, 0),
    "file_setattr": lambda: call("file_setattr", -1, None, None, 0, 0),
    "fallocate-keep-size": probe_fallocate_keep_size,
    "chattr": probe_chattr,
}


def run(name):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        result = PROBES[name]()
        code = 0 if result >= 0 else ctypes.get_errno()
        os.write(write_end, str(code).encode())
        os._exit(0)
    os.close(write_end)
    text = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    if not text:
        return "died"
    code = int(text)
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))


for probe in sys.argv[1:]:
    # Unmounting /proc or mounting over it is only tried in a private PID namespace, which
    # toolsmith always pairs with a private mount namespace: never on the host's. There the
    # tool is PID 2, toolsmith's init's child (or PID 1 itself without the init); on the host
    # PID 2 is the kernel's kthreadd, never a tool.
    if probe in ("umount-proc", "mount-tmpfs") and os.getpid() != 2 and os.getppid() != 0:
        print(probe, "skipped", flush=True)
        continue
    print(probe, run(probe), flush=True)
