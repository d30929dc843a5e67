//! `chaos-process`: every interval, sends a signal to one random non-essential process.
//!
//! Protection is by whole command name or by name prefix, never by substring (the
//! reference's `sh` pattern protected anything containing "sh", e.g. `ssh-agent`, `crash`):
//! see [`PROTECTED_NAMES`] and [`PROTECTED_PREFIXES`]. Kernel threads are never targeted.

use super::params::{ParamDef, ParamSchema, StrRule};
use super::scripts::{daemon_reload, enable_now, simple_service};
use super::{BuildContext, Workload, WorkloadOptions, WorkloadSettings};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "chaos-process";
pub const UNIT: &str = "virtwork-chaos-process.service";
pub const SCRIPT: &str = "/usr/local/bin/chaos-process.sh";

/// Signals the workload may send (closed list; `kill -<SIG>` names).
pub const SIGNALS: &[&str] = &[
    "SIGTERM", "SIGKILL", "SIGHUP", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGSTOP",
    "SIGCONT", "SIGABRT", "SIGALRM",
];

/// Command names (as `ps -o comm` shows them) that are never signalled, matched whole.
pub const PROTECTED_NAMES: &[&str] = &[
    "bash",
    "sh",
    "agetty",
    "auditd",
    "rsyslogd",
    "chronyd",
    "NetworkManager",
    "ps",
    "awk",
    "gawk",
    "mawk",
];
/// Command-name prefixes that are never signalled: systemd and its helpers, sshd and its
/// session processes, the D-Bus daemons, cloud-init, virtwork's own scripts (`comm` is
/// truncated to 15 characters, so `chaos-process.sh` shows as `chaos-process.s`).
pub const PROTECTED_PREFIXES: &[&str] = &[
    "systemd",
    "sshd",
    "dbus",
    "cloud-init",
    "virtwork-",
    "chaos-process",
];

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::string(
                "signal",
                "SIGTERM",
                StrRule::OneOf(SIGNALS),
                "signal to send",
            ),
            ParamDef::int("interval", 30, 1, 86_400, "seconds between chaos actions"),
            ParamDef::int(
                "min-pid",
                1000,
                2,
                4_194_304,
                "only processes with PID >= this",
            ),
        ],
    )
}

/// The chaos script. Sourcing it (tests) defines the functions without running `main`.
pub fn script() -> String {
    format!(
        r#"#!/bin/bash
# virtwork chaos-process: periodically signal one random non-essential process.
set -euo pipefail

CHAOS_SIGNAL="${{CHAOS_SIGNAL:-SIGTERM}}"
CHAOS_INTERVAL="${{CHAOS_INTERVAL:-30}}"
CHAOS_MIN_PID="${{CHAOS_MIN_PID:-1000}}"

# Never signalled: these whole command names ...
PROTECTED_NAMES="{names}"
# ... and command names starting with these prefixes.
PROTECTED_PREFIXES="{prefixes}"

log() {{
  echo "[$(date '+%Y-%m-%d %H:%M:%S')] $*"
}}

# Prints eligible PIDs, one per line: PID >= CHAOS_MIN_PID, not this script, not a kernel
# thread (kthreadd or its children), command name neither protected nor protected-prefixed.
eligible_pids() {{
  ps -eo pid=,ppid=,comm= | awk -v min="$CHAOS_MIN_PID" -v self="$$" \
    -v names="$PROTECTED_NAMES" -v prefixes="$PROTECTED_PREFIXES" '
    BEGIN {{
      n = split(names, list, " ")
      for (i = 1; i <= n; i++) exact[list[i]] = 1
      np = split(prefixes, plist, " ")
    }}
    {{
      pid = $1 + 0
      ppid = $2 + 0
      comm = $0
      sub(/^[ \t]*[0-9]+[ \t]+[0-9]+[ \t]+/, "", comm)
      if (pid < min + 0 || pid == self + 0 || pid == 2 || ppid == 2) next
      if (comm in exact) next
      for (i = 1; i <= np; i++) if (index(comm, plist[i]) == 1) next
      print pid
    }}'
}}

kill_random_process() {{
  local pids count pid info
  mapfile -t pids < <(eligible_pids)
  count=${{#pids[@]}}
  if [ "$count" -eq 0 ]; then
    log "No eligible processes found for chaos action"
    return 0
  fi
  pid=${{pids[$((RANDOM % count))]}}
  info=$(ps -p "$pid" -o pid=,comm=,args= 2>/dev/null || true)
  log "Sending ${{CHAOS_SIGNAL}} to PID ${{pid}}: ${{info}}"
  if kill -"${{CHAOS_SIGNAL}}" "$pid" 2>/dev/null; then
    log "Successfully sent ${{CHAOS_SIGNAL}} to PID ${{pid}}"
  else
    log "Failed to send signal to PID ${{pid}} (process may have already exited)"
  fi
}}

main() {{
  log "Starting chaos-process workload"
  log "Configuration: SIGNAL=${{CHAOS_SIGNAL}} INTERVAL=${{CHAOS_INTERVAL}}s MIN_PID=${{CHAOS_MIN_PID}}"
  while true; do
    kill_random_process
    sleep "$CHAOS_INTERVAL"
  done
}}

if [[ "${{BASH_SOURCE[0]}}" == "$0" ]]; then
  main
fi
"#,
        names = PROTECTED_NAMES.join(" "),
        prefixes = PROTECTED_PREFIXES.join(" "),
    )
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let p = &ctx.params;
    let unit = simple_service(
        "Virtwork chaos-process workload",
        "network.target",
        SCRIPT,
        10,
    )
    .service(
        "Environment",
        format!("\"CHAOS_SIGNAL={}\"", p.str("signal")),
    )
    .service(
        "Environment",
        format!("\"CHAOS_INTERVAL={}\"", p.str("interval")),
    )
    .service(
        "Environment",
        format!("\"CHAOS_MIN_PID={}\"", p.str("min-pid")),
    )
    .service("StandardOutput", "journal")
    .service("StandardError", "journal");
    let config = CloudConfig {
        packages: vec!["procps-ng".into()],
        write_files: vec![
            WriteFile::new(SCRIPT, script(), "0755"),
            unit.write_file(UNIT),
        ],
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        user: None,
    };
    Ok(Box::new(ctx.single(config)?))
}
