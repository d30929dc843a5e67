//! `tps`: transactions-per-second pairs. Servers run netserver plus a python HTTP server
//! serving a random test file; clients wait for the server, then run cycles of netperf
//! TCP_RR rounds and timed HTTP downloads through the `virtwork-tps-server` Service
//! (component `tps` AND role `server`), forever. Family differences live in [`profile`].

use super::params::{FileSize, ParamDef, ParamSchema, StrRule, parse_file_size};
use super::scripts::{
    WAIT_TCP, after_network_online, argv, daemon_reload, enable_now, simple_service, strings,
    wait_tcp_script,
};
use super::{
    BuildContext, GuestFamily, ROLE_SERVER, RolePayload, Workload, WorkloadOptions,
    WorkloadSettings, role_service,
};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::{Error, Result};

pub const NAME: &str = "tps";
pub const UNIT: &str = "virtwork-tps.service";
pub const SERVICE_NAME: &str = "virtwork-tps-server";
pub const SERVER_SCRIPT: &str = "/usr/local/bin/virtwork-tps-server.sh";
pub const CLIENT_SCRIPT: &str = "/usr/local/bin/virtwork-tps-client.sh";
pub const NETPERF_CONTROL_PORT: u16 = 12865;
pub const NETPERF_DATA_PORT: u16 = 12866;
pub const HTTP_PORT: u16 = 8080;

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::string(
                "file-size",
                "10M",
                StrRule::FileSize,
                "size of the HTTP test file, <n>K|M|G",
            ),
            ParamDef::int(
                "iterations",
                30,
                1,
                100_000,
                "netperf rounds and HTTP windows per cycle",
            ),
            ParamDef::int(
                "duration",
                60,
                1,
                86_400,
                "seconds per netperf round and HTTP window",
            ),
        ],
    )
}

/// The `dd` arguments that write exactly `size` bytes: `bs=1K` for K sizes, `bs=1M`
/// otherwise (G sizes as 1024 MiB blocks), so the client's byte count always matches.
pub fn dd_block_args(size: FileSize) -> String {
    match size.unit {
        'K' => format!("bs=1K count={}", size.count),
        'M' => format!("bs=1M count={}", size.count),
        _ => format!("bs=1M count={}", size.count * 1024),
    }
}

/// The server script: netserver, the test file, the HTTP server.
pub fn server_script(size: FileSize) -> String {
    format!(
        r#"#!/usr/bin/env bash
# virtwork tps server: netperf endpoint plus an HTTP server for file transfers.
set -e

echo "=== Virtwork TPS Server ==="
netserver -D -p {NETPERF_CONTROL_PORT} &
NETSERVER_PID=$!

mkdir -p /srv/virtwork
dd if=/dev/urandom of=/srv/virtwork/testfile {dd} iflag=fullblock 2>&1

python3 -m http.server {HTTP_PORT} --directory /srv/virtwork &
HTTP_PID=$!

echo "=== Virtwork TPS Server ready ==="
echo "netserver pid: ${{NETSERVER_PID}} (port {NETPERF_CONTROL_PORT})"
echo "http.server pid: ${{HTTP_PID}} (port {HTTP_PORT})"
echo "testfile: /srv/virtwork/testfile ({size})"
# Either server exiting ends the unit (systemd restarts it) rather than leaving half a server.
wait -n
echo "ERROR: a server process exited" >&2
exit 1
"#,
        dd = dd_block_args(size),
    )
}

/// Consecutive failed cycles after which the client unit fails.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// The client script: forever, cycles of ITERATIONS netperf TCP_RR rounds then ITERATIONS
/// timed HTTP windows, [`TPS_CYCLE_PAUSE_SECS`](crate::signals::contract::TPS_CYCLE_PAUSE_SECS)
/// apart, each round followed by a short pause (the contract's quiet gaps are these). A cycle in which nothing succeeded counts as failed;
/// [`MAX_CONSECUTIVE_FAILURES`] in a row end the unit.
pub fn client_script(server: &str, iterations: &str, duration: &str, size: FileSize) -> String {
    format!(
        r#"#!/usr/bin/env bash
# virtwork tps client: netperf TCP_RR transactions, then timed HTTP file transfers, forever.
set -uo pipefail

SERVER="{server}"
ITERATIONS={iterations}
MSG_SIZE=64
DURATION={duration}
FILE_SIZE_BYTES={bytes}
FAILED_CYCLES=0

while true; do
  OK=0
  echo "=== Phase 1: netperf TCP_RR (${{ITERATIONS}} x ${{DURATION}}s) ==="
  for i in $(seq 1 "$ITERATIONS"); do
    echo "--- TCP_RR round ${{i}}/${{ITERATIONS}} ---"
    if netperf -H "$SERVER" -p {NETPERF_CONTROL_PORT} -t TCP_RR -l "$DURATION" -- -r "$MSG_SIZE,$MSG_SIZE" -P ,{NETPERF_DATA_PORT}; then
      OK=$((OK + 1))
    fi
    sleep {round_pause}
  done

  echo "=== Phase 2: HTTP file transfers (${{ITERATIONS}} x ${{DURATION}}s) ==="
  for i in $(seq 1 "$ITERATIONS"); do
    echo "--- HTTP round ${{i}}/${{ITERATIONS}} ---"
    COUNT=0
    START=$(date +%s)
    END=$((START + DURATION))
    while [ "$(date +%s)" -lt "$END" ]; do
      if curl -sf -o /dev/null "http://${{SERVER}}:{HTTP_PORT}/testfile"; then
        COUNT=$((COUNT + 1))
      else
        sleep 1
      fi
    done
    ELAPSED=$(( $(date +%s) - START ))
    [ "$ELAPSED" -gt 0 ] || ELAPSED=1
    BYTES=$((COUNT * FILE_SIZE_BYTES))
    echo "Completed:  ${{COUNT}} transfers in ${{ELAPSED}}s"
    echo "Throughput: $((COUNT / ELAPSED)) transfers/sec, $((BYTES / ELAPSED / 1048576)) MB/s"
    [ "$COUNT" -gt 0 ] && OK=$((OK + 1))
    sleep {round_pause}
  done

  if [ "$OK" -eq 0 ]; then
    FAILED_CYCLES=$((FAILED_CYCLES + 1))
    echo "ERROR: no netperf round or HTTP transfer succeeded in this cycle (${{FAILED_CYCLES}} in a row)" >&2
    if [ "$FAILED_CYCLES" -ge {MAX_CONSECUTIVE_FAILURES} ]; then
      exit 1
    fi
  else
    FAILED_CYCLES=0
  fi
  echo "TPS cycle complete; next cycle in {cycle_pause}s"
  sleep {cycle_pause}
done
"#,
        bytes = size.bytes(),
        round_pause = crate::signals::contract::TPS_ROUND_PAUSE_SECS,
        cycle_pause = crate::signals::contract::TPS_CYCLE_PAUSE_SECS,
    )
}

/// Adds Debian's `non-free` component (Ubuntu's `multiverse`) to the guest's existing apt
/// sources, whatever mirror they name; idempotent (cloud-init runs bootcmd on every boot).
pub const ENABLE_NETPERF_COMPONENT: &str = r#"IDS=$(sed -n -E 's/^(ID|ID_LIKE)=//p' /etc/os-release | tr -d '"' | tr '\n' ' ')
case " ${IDS} " in
  *" ubuntu "*) COMPONENT=multiverse ;;
  *) COMPONENT=non-free ;;
esac
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -i -E "/^deb(-src)?[[:space:]]/{/[[:space:]]${COMPONENT}([[:space:]]|\$)/!s/[[:space:]]main([[:space:]]|\$)/ main ${COMPONENT}\1/}" "$f"
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  sed -i -E "/^Components:.*[[:space:]]main([[:space:]]|\$)/{/[[:space:]]${COMPONENT}([[:space:]]|\$)/!s/\$/ ${COMPONENT}/}" "$f"
done"#;

/// What the tps payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub server_packages: &'static [&'static str],
    pub client_packages: &'static [&'static str],
    /// Run before packages are installed (bootcmd).
    pub enable_archive_component: Option<&'static str>,
    /// A netserver the package starts by itself, stopped and disabled before ours starts
    /// (it would hold the control port).
    pub package_netserver_unit: Option<&'static str>,
}

/// The per-family table.
///
/// - fedora: `netperf` from the distribution's main repositories.
/// - debian: netperf is only in Debian's `non-free` component (Ubuntu: `multiverse`), which
///   the payload enables on the guest's own sources before installation — the same tool and
///   metrics on both families rather than refusing tps on Debian; Debian's package starts a
///   netserver of its own (`netperf.service`), which is disabled.
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora => Profile {
            server_packages: &["netperf", "python3"],
            client_packages: &["netperf", "curl"],
            enable_archive_component: None,
            package_netserver_unit: None,
        },
        GuestFamily::Debian => Profile {
            server_packages: &["netperf", "python3"],
            client_packages: &["netperf", "curl"],
            enable_archive_component: Some(ENABLE_NETPERF_COMPONENT),
            package_netserver_unit: Some("netperf.service"),
        },
    }
}

/// The runcmd of both roles: the package's own netserver out of the way, then our unit.
fn runcmd(profile: &Profile) -> Vec<Vec<String>> {
    let mut runcmd = vec![daemon_reload()];
    if let Some(unit) = profile.package_netserver_unit {
        runcmd.push(argv(&["systemctl", "disable", "--now", unit]));
    }
    runcmd.push(enable_now(UNIT));
    runcmd
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let raw = p.str("file-size");
    let size = parse_file_size(raw).map_err(|detail| {
        Error::input(format!(
            "tps: invalid file-size format: must be a positive integer followed by K, M, or G (e.g. '10M'): {}{detail}",
            crate::model::shown(raw)
        ))
    })?;
    let server_unit = simple_service("Virtwork TPS server (netperf + HTTP)", SERVER_SCRIPT, 10)
        .unit("After", "network.target");
    let client_unit = after_network_online(simple_service(
        "Virtwork TPS client (netperf TCP_RR + HTTP file transfer)",
        CLIENT_SCRIPT,
        30,
    ))
    .service(
        "ExecStartPre",
        format!(
            "{WAIT_TCP} {} {HTTP_PORT}",
            options.service_host(SERVICE_NAME)
        ),
    )
    .service("TimeoutStartSec", "infinity");
    let bootcmd: Vec<Vec<String>> = profile
        .enable_archive_component
        .iter()
        .map(|script| argv(&["bash", "-c", script]))
        .collect();
    let server = CloudConfig {
        bootcmd: bootcmd.clone(),
        packages: strings(profile.server_packages),
        write_files: vec![
            WriteFile::new(SERVER_SCRIPT, server_script(size), "0755"),
            server_unit.write_file(UNIT),
        ],
        runcmd: runcmd(&profile),
        ..Default::default()
    };
    let client = CloudConfig {
        bootcmd,
        packages: strings(profile.client_packages),
        write_files: vec![
            WriteFile::new(WAIT_TCP, wait_tcp_script(), "0755"),
            WriteFile::new(
                CLIENT_SCRIPT,
                client_script(
                    &options.service_host(SERVICE_NAME),
                    p.str("iterations"),
                    p.str("duration"),
                    size,
                ),
                "0755",
            ),
            client_unit.write_file(UNIT),
        ],
        runcmd: runcmd(&profile),
        ..Default::default()
    };
    let service = role_service(
        &options.service_name(SERVICE_NAME),
        NAME,
        ROLE_SERVER,
        &[
            ("netperf-ctrl", NETPERF_CONTROL_PORT),
            ("netperf-data", NETPERF_DATA_PORT),
            ("http-data", HTTP_PORT),
        ],
    );
    Ok(Box::new(ctx.server_client(
        RolePayload::new(server, &[UNIT]),
        RolePayload::new(client, &[UNIT]),
        service,
    )?))
}
