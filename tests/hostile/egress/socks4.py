#!/usr/bin/python3
# Attack: SOCKS4 and SOCKS4a, which the proxy does not speak, to b.test's
# address and to the name b.test (4a), hoping an unchecked legacy path
# connects. Also SOCKS5 BIND and UDP ASSOCIATE, which would open a way in or
# a datagram path. Prints held/ESCAPED per attempt.
import socket, struct, sys

def proxy():
    return socket.create_connection(("127.0.0.1", 3128), timeout=5)

def socks4(name, packet):
    s = proxy(); s.sendall(packet)
    reply = s.recv(8)
    print(("held: " if len(reply) < 2 or reply[1] != 0x5A else "ESCAPED: ") + name + " reply " + reply.hex())

socks4("socks4", b"\x04\x01" + struct.pack(">H", 80) + socket.inet_aton(sys.argv[1]) + b"x\x00")
socks4("socks4a", b"\x04\x01" + struct.pack(">H", 80) + b"\x00\x00\x00\x01x\x00b.test\x00")
for command, name in ((2, "socks5 bind"), (3, "socks5 udp associate")):
    s = proxy(); s.sendall(b"\x05\x01\x00"); s.recv(2)
    s.sendall(b"\x05" + bytes([command]) + b"\x00\x01" + socket.inet_aton(sys.argv[1]) + struct.pack(">H", 80))
    reply = s.recv(10)
    print(("held: " if len(reply) < 2 or reply[1] != 0 else "ESCAPED: ") + name + " reply " + reply.hex())
