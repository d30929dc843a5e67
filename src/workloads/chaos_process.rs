//! `chaos-process`: every interval, sends a signal to one process; by default to one of the
//! victim services the payload ships itself, so every kill has a visible effect.
//!
//! Victims are `victims` instances of `virtwork-chaos-victim@.service`: idle workers (a
//! logged start, then `sleep infinity`) under `Restart=always`, so each kill is followed by a systemd
//! restart. The chaos script logs each kill (`KILL n=<count> ...`) and each restart it
//! observes (`RESTART n=<count> ...`); each victim logs its own start, so both are countable
//! in the journal. `mode=random` instead picks any eligible process (victims included).
//! Protection is by whole command name, name prefix and systemd unit, never by substring:
//! see [`PROTECTED_NAMES`], [`PROTECTED_PREFIXES`] and [`PROTECTED_UNITS`]. Kernel threads
//! are never targeted.

use super::params::{ParamDef, ParamSchema, StrRule};
use super::scripts::{Unit, daemon_reload, enable_now, simple_service, strings};
use super::{BuildContext, GuestFamily, RolePayload, Workload, WorkloadOptions, WorkloadSettings};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "chaos-process";
pub const UNIT: &str = "virtwork-chaos-process.service";
pub const SCRIPT: &str = "/usr/local/bin/chaos-process.sh";
/// The victim template unit; instances are `virtwork-chaos-victim@<n>.service`, n from 1.
pub const VICTIM_TEMPLATE: &str = "virtwork-chaos-victim@.service";
pub const VICTIM_SCRIPT: &str = "/usr/local/bin/chaos-victim";

/// Signals the workload may send (closed list; `kill -<SIG>` names).
pub const SIGNALS: &[&str] = &[
    "SIGTERM", "SIGKILL", "SIGHUP", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGSTOP",
    "SIGCONT", "SIGABRT", "SIGALRM",
];

/// Targeting modes.
pub const MODES: &[&str] = &["victims", "random"];

/// Command names (as `ps -o comm` shows them) that are never signalled, matched whole:
/// shells, the guest agent (KubeVirt's exec probes and AgentConnected), DHCP clients (the
/// VM's address), logging/time daemons and the tools the script itself runs.
pub const PROTECTED_NAMES: &[&str] = &[
    "bash",
    "sh",
    "agetty",
    "auditd",
    "rsyslogd",
    "chronyd",
    "NetworkManager",
    "qemu-ga",
    "dhclient",
    "dhcpcd",
    "udhcpc",
    "ps",
    "awk",
    "gawk",
    "mawk",
];
/// Command-name prefixes that are never signalled: systemd and its helpers (networkd,
/// resolved, journald, udevd, logind), sshd and its session processes, the D-Bus daemons,
/// cloud-init, virtwork's own services (`comm` is truncated to 15 characters, so
/// `chaos-process.sh` shows as `chaos-process.s`).
pub const PROTECTED_PREFIXES: &[&str] = &[
    "systemd",
    "sshd",
    "dbus",
    "cloud-init",
    "virtwork-",
    "chaos-process",
];
/// systemd units (shell `case` patterns) whose processes are never signalled, whatever
/// their names: what keeps the guest reachable and managed. Victims are matched first and
/// stay eligible.
pub const PROTECTED_UNITS: &[&str] = &[
    "init.scope",
    "qemu-guest-agent.service",
    "ssh.service",
    "sshd.service",
    "sshd@*",
    "sshd-*",
    "cloud-*",
    "systemd-*",
    "dbus*",
    "NetworkManager*",
    "dhclient*",
    "dhcpcd*",
    "chrony*",
    "getty@*",
    "serial-getty@*",
    "user@*",
    "session-*.scope",
    "virtwork-*",
];

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::string(
                "signal",
                "SIGTERM",
                StrRule::Signal(SIGNALS),
                "signal to send",
            ),
            ParamDef::int("interval", 30, 1, 86_400, "seconds between chaos actions"),
            ParamDef::string(
                "mode",
                "victims",
                StrRule::OneOf(MODES),
                "victims: signal the shipped victim services; random: any eligible process",
            ),
            ParamDef::int(
                "victims",
                3,
                1,
                32,
                "victim services shipped (virtwork-chaos-victim@1..N)",
            ),
            ParamDef::int(
                "min-pid",
                1000,
                2,
                4_194_304,
                "random mode: only processes with PID >= this",
            ),
        ],
    )
}

/// The victim: logs its start (countable restarts), then becomes a `sleep` that uses no CPU
/// and dies of every terminating signal (a shell would survive SIGINT while it waits for a
/// child).
pub fn victim_script() -> String {
    r#"#!/bin/bash
# virtwork chaos-process victim: an idle worker for chaos-process to kill; systemd restarts
# it (Restart=always), and each start is logged.
echo "chaos victim ${1:-?} started (pid $$)"
exec sleep infinity
"#
    .to_string()
}

/// The chaos script. Sourcing it (tests) defines the functions without running `main`.
// long: one shell script as a single literal; splitting it would scatter the script.
pub fn script() -> String {
    let units = PROTECTED_UNITS.join("|");
    format!(
        r#"#!/bin/bash
# virtwork chaos-process: periodically signal one victim service (or, in random mode, one
# random non-essential process), logging every kill and every observed restart.
set -euo pipefail

CHAOS_SIGNAL="${{CHAOS_SIGNAL:-SIGTERM}}"
CHAOS_INTERVAL="${{CHAOS_INTERVAL:-30}}"
CHAOS_MODE="${{CHAOS_MODE:-victims}}"
CHAOS_VICTIMS="${{CHAOS_VICTIMS:-3}}"
CHAOS_MIN_PID="${{CHAOS_MIN_PID:-1000}}"

# Never signalled: these whole command names ...
PROTECTED_NAMES="{names}"
# ... and command names starting with these prefixes.
PROTECTED_PREFIXES="{prefixes}"

KILLS=0
RESTARTS=0
# Rounds in a row whose victim had no process; too many means the victims are not running
# and the workload would only pretend to work.
MISSING=0
MAX_MISSING=10
PENDING_UNIT=""
PENDING_PID=""

log() {{
  echo "[$(date '+%Y-%m-%d %H:%M:%S')] $*"
}}

# The systemd unit a PID runs in (last component of its cgroup path).
unit_of() {{
  local cgroup
  cgroup=$(tail -n 1 "/proc/$1/cgroup" 2>/dev/null || true)
  echo "${{cgroup##*/}}"
}}

# Whether processes of unit $1 must never be signalled.
protected_unit() {{
  case "$1" in
    virtwork-chaos-victim@*) return 1 ;;
    {units}) return 0 ;;
  esac
  return 1
}}

# Prints eligible PIDs, one per line: PID >= CHAOS_MIN_PID, not this script, not a kernel
# thread (kthreadd or its children), command name neither protected nor protected-prefixed,
# not in a protected unit.
eligible_pids() {{
  local pid
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
    }}' | while read -r pid; do
      protected_unit "$(unit_of "$pid")" || echo "$pid"
    done
}}

# Logs the restart of the victim killed last, once systemd has started a new process.
check_restart() {{
  local pid
  [ -n "$PENDING_UNIT" ] || return 0
  pid=$(systemctl show -p MainPID --value "$PENDING_UNIT" 2>/dev/null || echo 0)
  if [ "${{pid:-0}}" != 0 ] && [ "$pid" != "$PENDING_PID" ]; then
    RESTARTS=$((RESTARTS + 1))
    log "RESTART n=${{RESTARTS}} victim=${{PENDING_UNIT}} old_pid=${{PENDING_PID}} new_pid=${{pid}}"
    PENDING_UNIT=""
  fi
}}

signal_pid() {{
  local pid="$1" what="$2"
  if kill -"${{CHAOS_SIGNAL}}" "$pid" 2>/dev/null; then
    KILLS=$((KILLS + 1))
    log "KILL n=${{KILLS}} signal=${{CHAOS_SIGNAL}} pid=${{pid}} ${{what}}"
    return 0
  fi
  log "Failed to send ${{CHAOS_SIGNAL}} to PID ${{pid}} (process may have already exited)"
  return 1
}}

kill_victim() {{
  local unit pid
  unit="virtwork-chaos-victim@$((RANDOM % CHAOS_VICTIMS + 1)).service"
  pid=$(systemctl show -p MainPID --value "$unit" 2>/dev/null || echo 0)
  if [ "${{pid:-0}}" = 0 ]; then
    MISSING=$((MISSING + 1))
    log "Victim ${{unit}} has no running process (restarting?); skipping this round (${{MISSING}} in a row)"
    if [ "$MISSING" -ge "$MAX_MISSING" ]; then
      log "ERROR: no victim process found in ${{MAX_MISSING}} rounds in a row; the victims are not running"
      exit 1
    fi
    return 0
  fi
  MISSING=0
  if signal_pid "$pid" "victim=${{unit}}"; then
    PENDING_UNIT="$unit"
    PENDING_PID="$pid"
  fi
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
  info=$(ps -p "$pid" -o comm=,args= 2>/dev/null || true)
  signal_pid "$pid" "unit=$(unit_of "$pid") process=${{info}}" || true
}}

main() {{
  log "Starting chaos-process workload"
  log "Configuration: MODE=${{CHAOS_MODE}} SIGNAL=${{CHAOS_SIGNAL}} INTERVAL=${{CHAOS_INTERVAL}}s VICTIMS=${{CHAOS_VICTIMS}} MIN_PID=${{CHAOS_MIN_PID}}"
  while true; do
    check_restart
    if [ "$CHAOS_MODE" = random ]; then
      kill_random_process
    else
      kill_victim
    fi
    sleep "$CHAOS_INTERVAL"
    check_restart
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

/// What the chaos-process payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// `ps` (procps).
    pub packages: &'static [&'static str],
}

/// The per-family table: `ps` is in `procps-ng` on Fedora, `procps` on Debian.
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora => Profile {
            packages: &["procps-ng"],
        },
        GuestFamily::Debian => Profile {
            packages: &["procps"],
        },
    }
}

/// The victim instance units, `virtwork-chaos-victim@1.service` ..= `@count`.
pub fn victim_units(count: i64) -> Vec<String> {
    (1..=count)
        .map(|n| format!("virtwork-chaos-victim@{n}.service"))
        .collect()
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let victims = victim_units(p.int("victims"));
    let victim = Unit::new("Virtwork chaos-process victim %i")
        .service("Type", "simple")
        .service("ExecStart", format!("{VICTIM_SCRIPT} %i"))
        .service("Restart", "always")
        .service("RestartSec", "2")
        // Low intensity: the victims must not compete with anything else in the guest.
        .service("Nice", "19")
        .service("CPUQuota", "5%");
    let unit = simple_service("Virtwork chaos-process workload", SCRIPT, 10)
        .unit("Wants", victims.join(" "))
        .unit("After", victims.join(" "))
        .service(
            "Environment",
            format!("\"CHAOS_SIGNAL={}\"", p.str("signal")),
        )
        .service(
            "Environment",
            format!("\"CHAOS_INTERVAL={}\"", p.str("interval")),
        )
        .service("Environment", format!("\"CHAOS_MODE={}\"", p.str("mode")))
        .service(
            "Environment",
            format!("\"CHAOS_VICTIMS={}\"", p.str("victims")),
        )
        .service(
            "Environment",
            format!("\"CHAOS_MIN_PID={}\"", p.str("min-pid")),
        )
        .service("StandardOutput", "journal")
        .service("StandardError", "journal");
    let mut runcmd = vec![daemon_reload()];
    runcmd.extend(victims.iter().map(|v| enable_now(v)));
    runcmd.push(enable_now(UNIT));
    let config = CloudConfig {
        packages: strings(profile.packages),
        write_files: vec![
            WriteFile::new(VICTIM_SCRIPT, victim_script(), "0755"),
            WriteFile::new(SCRIPT, script(), "0755"),
            victim.write_file(VICTIM_TEMPLATE),
            unit.write_file(UNIT),
        ],
        runcmd,
        ..Default::default()
    };
    Ok(Box::new(ctx.single(RolePayload::new(config, &[UNIT]))?))
}
