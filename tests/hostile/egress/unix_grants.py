#!/usr/bin/python3
# Attack: a run granted one Unix socket ($1) tries every other way to reach
# another pathname socket ($2), an abstract name ($3), or a socket it chooses
# through its writable directory ($4): the other path as stream and
# seqpacket, a symlink to it, /proc/self/root and /proc/PID/root forms, a
# doubled-slash form, datagram sockets and pairs, sendto/sendmsg with an
# address, a socket passed over SCM_RIGHTS from a child, a connect from a
# child, the address rewritten by another thread during connect, and the
# descriptor swapped between a Unix and an IPv4 socket during connect.
# Each server answers with its label: the first line is `granted: LABEL`
# (the granted connect), then `held: ...` for each refusal, `ESCAPED: ...`
# for anything that reached a socket other than $1, and last
# `granted-connects: N`, the connects the server of $1 must have counted.
import ctypes, os, socket, sys, threading

granted, other, abstract, writable = sys.argv[1:5]
libc = ctypes.CDLL(None, use_errno=True)
reached_granted = 0


def label(s):
    s.settimeout(5)
    return s.recv(64).decode().strip()


def verdict(name, got):
    global reached_granted
    if got == "granted":
        reached_granted += 1
        print("held: " + name + " reached only the granted socket")
    else:
        print("ESCAPED: " + name + " reached " + got)


def attempt(name, kind, address):
    try:
        s = socket.socket(socket.AF_UNIX, kind)
        s.connect(address)
        verdict(name, label(s))
    except OSError as error:
        print("held: " + name + " " + (error.strerror or str(error)))


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(granted)
reached_granted += 1
print("granted: " + label(s))

attempt("other path", socket.SOCK_STREAM, other)
attempt("other path seqpacket", socket.SOCK_SEQPACKET, other)
attempt("abstract name", socket.SOCK_STREAM, "\0" + abstract)
link = os.path.join(writable, "link.sock")
os.symlink(other, link)
attempt("symlink in the writable dir", socket.SOCK_STREAM, link)
attempt("/proc/self/root form", socket.SOCK_STREAM, "/proc/self/root" + other)
attempt("/proc/PID/root form", socket.SOCK_STREAM, "/proc/%d/root%s" % (os.getpid(), other))
attempt("doubled slashes", socket.SOCK_STREAM, other.replace("/", "//"))

for name, make in (
    ("datagram socket sendto", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)),
    ("datagram pair sendto", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0]),
):
    try:
        make().sendto(b"leak", other)
        print("ESCAPED: " + name + " sent")
    except OSError as error:
        print("held: " + name + " " + error.strerror)
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).sendto(b"leak", other)
    print("ESCAPED: stream sendto sent")
except OSError as error:
    print("held: stream sendto " + error.strerror)
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).sendmsg([b"leak"], [], 0, other)
    print("ESCAPED: seqpacket sendmsg sent")
except OSError as error:
    print("held: seqpacket sendmsg " + error.strerror)

# A socket made by a child and passed over SCM_RIGHTS, and the child's own connect.
parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
pid = os.fork()
if pid == 0:
    passed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    socket.send_fds(child_end, [b"x"], [passed.fileno()])
    try:
        own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        own.connect(other)
        os._exit(1 if label(own) != "granted" else 2)
    except OSError:
        os._exit(0)
_, fds, _, _ = socket.recv_fds(parent_end, 1, 1)
try:
    passed = socket.socket(fileno=fds[0])
    passed.connect(other)
    verdict("passed socket", label(passed))
except OSError as error:
    print("held: passed socket " + error.strerror)
_, status = os.waitpid(pid, 0)
child = os.waitstatus_to_exitcode(status)
if child == 1:
    print("ESCAPED: a child's connect reached the other socket")
elif child == 2:
    reached_granted += 1
    print("held: a child's connect reached only the granted socket")
else:
    print("held: a child's connect refused")


def unix_address(path):
    buffer = ctypes.create_string_buffer(110)
    ctypes.memmove(buffer, (socket.AF_UNIX).to_bytes(2, sys.byteorder), 2)
    ctypes.memmove(ctypes.byref(buffer, 2), path.encode() + b"\0", len(path) + 1)
    return buffer


# The address rewritten from another thread while connect runs: whatever the
# kernel would read again, only the granted socket may answer.
address = unix_address(granted)
granted_bytes = unix_address(granted).raw
other_bytes = unix_address(other).raw
stop = threading.Event()


def rewrite():
    while not stop.is_set():
        ctypes.memmove(address, other_bytes, 110)
        ctypes.memmove(address, granted_bytes, 110)


racer = threading.Thread(target=rewrite)
racer.start()
escaped = 0
for _ in range(1000):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if libc.connect(s.fileno(), address, 110) == 0:
        if label(s) == "granted":
            reached_granted += 1
        else:
            escaped += 1
    s.close()
stop.set()
racer.join()
print(("ESCAPED: " if escaped else "held: ") + "rewritten address, %d reached the other socket" % escaped)

# The descriptor swapped between a Unix and an IPv4 socket during connect,
# the address flipping between the granted path and the other one.
stop.clear()
racer = threading.Thread(target=rewrite)
racer.start()
slot = os.open("/dev/null", os.O_RDONLY)
escaped = 0
for _ in range(100):
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    inet = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    swapping = threading.Event()

    def swap():
        while not swapping.is_set():
            os.dup2(unix.fileno(), slot)
            os.dup2(inet.fileno(), slot)

    swapper = threading.Thread(target=swap)
    swapper.start()
    libc.connect(slot, address, 110)
    swapping.set()
    swapper.join()
    try:
        unix.getpeername()
        got = label(unix)
        if got == "granted":
            reached_granted += 1
        else:
            escaped += 1
    except OSError:
        pass
    unix.close()
    inet.close()
stop.set()
racer.join()
print(("ESCAPED: " if escaped else "held: ") + "swapped descriptor, %d reached the other socket" % escaped)
print("granted-connects: %d" % reached_granted)
