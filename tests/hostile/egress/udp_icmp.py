#!/usr/bin/python3
# Attack: leave without the proxy over UDP (to a UDP listener of the test at
# $1:$2) and ICMP (an unprivileged ping socket and a raw socket). The run's
# namespace has only loopback, so nothing may leave; prints held/ESCAPED.
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"leak", (host, port))
    print("ESCAPED: udp datagram sent")
except OSError as error:
    print("held: udp " + error.strerror)
for kind, proto in ((socket.SOCK_DGRAM, socket.IPPROTO_ICMP), (socket.SOCK_RAW, socket.IPPROTO_ICMP)):
    try:
        s = socket.socket(socket.AF_INET, kind, proto)
        s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", (host, 0))
        print("ESCAPED: icmp sent")
    except OSError as error:
        print("held: icmp " + error.strerror)
