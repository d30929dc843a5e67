#!/bin/sh
# Runs "$@" at the highest CPU priority, so a measurement's wall time reflects the tool rather
# than whatever else the machine runs (docs/performance.md). Needs root (CAP_SYS_NICE).
#
# Plain `nice -n -20` is not enough where kernel.sched_autogroup_enabled=1 (the default on
# most desktop and many server kernels): the scheduler first shares CPU equally between
# sessions ("autogroups") and applies nice only inside one. So the command gets a session of
# its own (setsid), that session's autogroup is set to nice -20, and the command runs at
# nice -20 inside it.
#
#   sh benches/high-priority.sh /usr/bin/time -v target/release/virtwork ...
set -eu
exec setsid -w sh -c 'echo -20 >"/proc/$$/autogroup" && exec nice -n -20 "$@"' sh "$@"
