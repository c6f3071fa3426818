#!/usr/bin/python3
# Attack: ignore the proxy variables and connect straight to the granted
# host's address $1 on port $2, over IPv4 and IPv4-mapped IPv6.
import socket, sys
port = int(sys.argv[2])
for family, address in ((socket.AF_INET, sys.argv[1]), (socket.AF_INET6, "::ffff:" + sys.argv[1])):
    try:
        socket.socket(family, socket.SOCK_STREAM).connect((address, port))
        print("ESCAPED: connected to " + address)
    except OSError as error:
        print("held: " + address + " " + error.strerror)
