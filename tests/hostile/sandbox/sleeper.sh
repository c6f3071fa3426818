#!/bin/sh
# Starts a background sleeper and a setsid'd one, then sleeps: a tree that
# must die with the executor.
sleep 300 &
setsid sleep 300 &
echo started
sleep 300
