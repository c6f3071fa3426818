#!/bin/bash
# Attack: reach the test host's loopback through IPv6 literals the proxy
# might not recognize as loopback: ::1, ::ffff:127.0.0.1 (IPv4-mapped),
# ::127.0.0.1 (IPv4-compatible), 64:ff9b::7f00:1 (NAT64), over HTTP and SOCKS5.
for literal in "::1" "::ffff:127.0.0.1" "::127.0.0.1" "64:ff9b::7f00:1"; do
    for how in "" "--proxy $ALL_PROXY"; do
        if curl -sf -m 5 -g --noproxy '' $how "http://[$literal]:80/" >/dev/null 2>&1; then
            echo "ESCAPED: [$literal] reached ${how:-http}"
        else
            echo "held: [$literal] refused ${how:-http}"
        fi
    done
done
