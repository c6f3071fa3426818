#!/usr/bin/python3
# Attack: wedge the Unix socket supervisor, which makes every connect of a
# run granted Unix socket paths itself, on its own thread, with the tool's
# socket. $1 is a granted socket whose server never accepts (its backlog is
# full after one connection); $2 is a path that is not granted.
# 1. A socket whose own send timeout is three years (SO_SNDTIMEO): the
#    supervisor bounded only sockets *without* a timeout, so its connect
#    waited three years, the call never ended and its supervisor thread was
#    lost (the test checks from outside that the run returns).
# 2. The same with another thread resetting SO_SNDTIMEO to 0 (no timeout)
#    and flipping O_NONBLOCK on the socket while the supervisor connects.
# 3. 200 threads connecting at once to $1, each blocking, until the
#    deadline kills the run: the run must still end within the bound.
# 4. Other doors to a connect the supervisor does not see: io_uring, and the
#    x32 system-call ABI's connect to $2.
# Prints `held: ...` or `ESCAPED: ...` for 1, 2 and 4 as each ends.
import ctypes, errno, fcntl, os, socket, struct, sys, threading, time

slow, other = sys.argv[1:3]
libc = ctypes.CDLL(None, use_errno=True)
THREE_YEARS = struct.pack("ll", 3 * 365 * 24 * 3600, 0)
keep = []


def fill_backlog():
    for _ in range(4):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(slow)
        except OSError:
            pass
        keep.append(s)


def bounded(name, s):
    started = time.monotonic()
    try:
        s.connect(slow)
        print("ESCAPED: " + name + " connected to a server that never accepts", flush=True)
    except OSError as error:
        took = time.monotonic() - started
        word = "held" if took < 15 else "ESCAPED"
        print("%s: %s ended after %.0f s (%s)" % (word, name, took, errno.errorcode.get(error.errno)), flush=True)


fill_backlog()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, THREE_YEARS)
bounded("a connect with a three-year SO_SNDTIMEO", s)

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
stop = threading.Event()


def meddle():
    fd = s.fileno()
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    while not stop.is_set():
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


meddler = threading.Thread(target=meddle, daemon=True)
meddler.start()
bounded("a connect whose timeout and O_NONBLOCK another thread rewrites", s)
stop.set()

ring = libc.syscall(425, 8, ctypes.create_string_buffer(120))  # io_uring_setup
print(("held: io_uring_setup refused (%s)" % errno.errorcode.get(ctypes.get_errno()))
      if ring < 0 else "ESCAPED: io_uring_setup gave a ring", flush=True)
x = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
address = struct.pack("H", socket.AF_UNIX) + other.encode() + b"\0"
done = libc.syscall(0x40000000 | 42, x.fileno(), ctypes.create_string_buffer(address, len(address)), len(address))
print(("held: x32 connect refused (%s)" % errno.errorcode.get(ctypes.get_errno()))
      if done < 0 else "ESCAPED: x32 connect reached " + other, flush=True)


def blocked():
    t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        t.connect(slow)
    except OSError:
        pass


print("flooding", flush=True)
for _ in range(200):
    threading.Thread(target=blocked, daemon=True).start()
time.sleep(3600)
