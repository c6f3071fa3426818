#!/bin/bash
# Tries to open a TCP connection to 127.0.0.1:$1 (a listener the test owns).
# Prints "connected" or "refused"; exits 0 either way.
if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    echo connected
else
    echo refused
fi
