#!/bin/bash
# Attack: DNS rebinding. The first request to the granted a.test resolves to
# its public address and succeeds; then the name is rebound (the test
# rewrites the hosts file once it sees the first connection) to the test
# host's loopback, and the same request is made again, hoping the proxy
# trusts its earlier check. Waits for the test's signal: $1 (a file) appears.
first=$(curl -sf -m 5 http://a.test/ 2>/dev/null || echo refused)
echo "first: $first"
for _ in $(seq 100); do [ -e "$1" ] && break; sleep 0.05; done
if body=$(curl -sf -m 5 http://a.test/ 2>/dev/null); then
    echo "ESCAPED: second request reached: $body"
else
    echo "held: the rebound name was refused"
fi
