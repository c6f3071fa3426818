#!/bin/bash
# Attack: a.test is granted (ports 80 and 443 only); tunnel to it on another
# port ($1) with CONNECT and with SOCKS5, where no Host header is looked at.
for how in "--proxytunnel" "--proxy $ALL_PROXY"; do
    if curl -sf -m 5 $how "http://a.test:$1/" >/dev/null 2>&1; then
        echo "ESCAPED: a.test:$1 reached ($how)"
    else
        echo "held: a.test:$1 refused ($how)"
    fi
done
