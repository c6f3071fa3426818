#!/bin/sh
# What it tries (issue 22, finding 5): toolsmith's init, PID 1 of the call's PID
# namespace, shares toolsmith's memory and descriptor table, so its /proc
# files are toolsmith's: the tool raises the OOM score (oom_score_adj,
# oom_adj: the kernel propagates them to every process sharing the memory,
# toolsmith included, no capability needed), changes the coredump filter,
# resets the memory counters (clear_refs), and reads the command line
# (toolsmith's, with the --token-file path), environment, descriptors, maps,
# memory and status; through /proc/1, /proc/1/task/1 and the init's pid as
# the tool finds it ($PPID), and again after scanning /proc for any process
# that is not the tool's. Prints "held: ..." or "ESCAPED: ..." per attempt,
# and whatever it read, so the test can look for toolsmith's command line.
dirs="/proc/1 /proc/1/task/1 /proc/$PPID /proc/$PPID/task/$PPID"
for pid in /proc/[0-9]*; do
  [ -r "$pid/stat" ] || continue
  case "${pid#/proc/}" in "$$") continue ;; esac
  dirs="$dirs $pid"
done
for dir in $dirs; do
  for attempt in "oom_score_adj 1000" "oom_adj 15" "coredump_filter 0x7f" "clear_refs 5"; do
    set -- $attempt
    if (echo "$2" > "$dir/$1") 2>/dev/null; then
      echo "ESCAPED: wrote $dir/$1"
    else
      echo "held: write $dir/$1"
    fi
  done
  for file in cmdline environ status maps; do
    if content=$(tr '\0' ' ' < "$dir/$file" 2>/dev/null) && [ -n "$content" ]; then
      echo "ESCAPED: read $dir/$file: $content"
    else
      echo "held: read $dir/$file"
    fi
  done
  if head -c 1 "$dir/mem" > /dev/null 2>&1; then echo "ESCAPED: read $dir/mem"; else echo "held: read $dir/mem"; fi
  if entries=$(ls "$dir/fd" 2>/dev/null) && [ -n "$entries" ]; then
    echo "ESCAPED: listed $dir/fd: $entries" | tr '\n' ' '; echo
  else
    echo "held: list $dir/fd"
  fi
done
