#!/bin/sh
# Tries to create a file in each directory given as an argument, and to
# write to /dev/null. Prints "wrote DIR" or "denied DIR" for each.
for dir in "$@"; do
    if echo x > "$dir/sandbox-probe" 2>/dev/null; then
        echo "wrote $dir"
        rm -f "$dir/sandbox-probe"
    else
        echo "denied $dir"
    fi
done
if echo x > /dev/null; then echo "wrote /dev/null"; else echo "denied /dev/null"; fi
