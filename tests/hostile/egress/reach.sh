#!/bin/bash
# Not an attack: the granted destination a.test through every door of the
# proxy (HTTP with an absolute URI, CONNECT to port 443, SOCKS5 with remote
# name resolution), then b.test, the sandbox's own loopback, names that
# resolve to loopback and to the metadata address, and a.test on port 8080.
# Prints one line per attempt: "<what>: <body or refused>".
try() { local what=$1; shift; local body; body=$(curl -sf -m 5 "$@" 2>/dev/null) && echo "$what: $body" || echo "$what: refused"; }
try http http://a.test/
try connect --proxytunnel http://a.test:443/
try socks5 --proxy "$ALL_PROXY" http://a.test/
try b http://b.test/
try own-loopback --noproxy '' http://127.0.0.1:80/
try loop-name http://loop.test/
try metadata-name http://meta.test/latest/meta-data/
try other-port http://a.test:8080/
try connect-other-port --proxytunnel http://a.test:8080/
