#!/bin/bash
# Attack: borrow another run's proxy. A concurrent run of the same executor
# is granted b.test; this run is not. Its own 127.0.0.1:3128 is the only
# proxy it can name; try b.test through it (HTTP, CONNECT, SOCKS5).
for how in "" "--proxytunnel" "--proxy $ALL_PROXY"; do
    if curl -sf -m 5 $how http://b.test/ >/dev/null 2>&1; then
        echo "ESCAPED: b.test reached through a proxy (${how:-http})"
    else
        echo "held: b.test refused (${how:-http})"
    fi
done
