#!/usr/bin/python3
# Attack: a pathname Unix socket is reachable from any network namespace
# (a container engine's socket, the D-Bus system bus): connect to the test's
# listener at $1, which no grant lists, as a stream and as a datagram socket,
# and send through a datagram socketpair's sendto.
import socket, sys
for kind, name in ((socket.SOCK_STREAM, "stream"), (socket.SOCK_DGRAM, "datagram")):
    try:
        s = socket.socket(socket.AF_UNIX, kind)
        s.connect(sys.argv[1]); s.send(b"leak")
        print("ESCAPED: unix " + name + " connected")
    except OSError as error:
        print("held: unix " + name + " " + error.strerror)
try:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"leak", sys.argv[1])
    print("ESCAPED: socketpair datagram sent")
except OSError as error:
    print("held: socketpair datagram " + error.strerror)
