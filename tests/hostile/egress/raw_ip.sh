#!/bin/bash
# Attack: reach a destination that is not granted by naming its address
# instead of its name (b.test's address $1, through the proxy, over HTTP,
# CONNECT and SOCKS5).
for how in "" "--proxytunnel" "--proxy $ALL_PROXY"; do
    if curl -sf -m 5 $how "http://$1/" >/dev/null 2>&1; then
        echo "ESCAPED: $1 reached (${how:-http})"
    else
        echo "held: $1 refused (${how:-http})"
    fi
done
