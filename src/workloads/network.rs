//! `network`: iperf3 servers and clients in pairs; clients reach the servers through the
//! run's `virtwork-iperf3-server-<run tag>` Service, which selects only this run's server VMs.
//!
//! A client unit waits (`activating`) until the Service accepts connections, then loops
//! iperf3 runs; it tolerates isolated failed runs (an iperf3 server serves one client at a
//! time, so a run can meet a busy server) but fails after [`MAX_CONSECUTIVE_FAILURES`] in a
//! row, so a client that cannot reach any server shows as failed rather than running idle.

use super::params::{ParamDef, ParamSchema};
use super::scripts::{
    WAIT_TCP, after_network_online, daemon_reload, enable_now, simple_service, strings,
    wait_tcp_script,
};
use super::{
    BuildContext, GuestFamily, ROLE_SERVER, RolePayload, Workload, WorkloadOptions,
    WorkloadSettings, role_service,
};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "network";
pub const UNIT: &str = "virtwork-network.service";
pub const SERVICE_NAME: &str = "virtwork-iperf3-server";
pub const PORT: u16 = 5201;
pub const CLIENT_SCRIPT: &str = "/usr/local/bin/virtwork-network-client.sh";
/// Failed iperf3 runs in a row after which the client unit fails.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 6;

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::int(
                "parallel-streams",
                4,
                1,
                128,
                "iperf3 -P parallel client streams",
            ),
            ParamDef::int("test-duration", 60, 1, 86_400, "iperf3 -t seconds per test"),
        ],
    )
}

/// The fully qualified name of this run's server Service.
pub fn server_host(options: &WorkloadOptions) -> String {
    options.service_host(SERVICE_NAME)
}

/// The client loop's iperf3 command line against `server`.
pub fn client_command(server: &str, duration: &str, streams: &str) -> String {
    format!("iperf3 -c {server} -t {duration} -P {streams} --bidir")
}

/// The client loop against `server`.
pub fn client_script(server: &str, duration: &str, streams: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork network client: iperf3 runs against the server Service, forever.
set -uo pipefail

FAILURES=0
while true; do
  if {command}; then
    FAILURES=0
  else
    FAILURES=$((FAILURES + 1))
    echo "iperf3 run failed (${{FAILURES}} in a row)" >&2
    if [ "$FAILURES" -ge {MAX_CONSECUTIVE_FAILURES} ]; then
      echo "ERROR: {MAX_CONSECUTIVE_FAILURES} iperf3 runs in a row failed; giving up" >&2
      exit 1
    fi
  fi
  sleep {pause}
done
"#,
        command = client_command(server, duration, streams),
        pause = crate::signals::contract::IPERF_PAUSE_SECS,
    )
}

/// What the network payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub packages: &'static [&'static str],
}

/// The per-family table: iperf3 has the same name and path everywhere (Debian's package
/// does not start a server of its own unless asked to at install time).
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora | GuestFamily::Debian => Profile {
            packages: &["iperf3"],
        },
    }
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let server_unit = simple_service("Virtwork iperf3 server", "/usr/bin/iperf3 -s", 10)
        .unit("After", "network.target");
    let client_unit =
        after_network_online(simple_service("Virtwork iperf3 client", CLIENT_SCRIPT, 10))
            .service(
                "ExecStartPre",
                format!("{WAIT_TCP} {} {PORT}", server_host(options)),
            )
            .service("TimeoutStartSec", "infinity");
    let server = CloudConfig {
        packages: strings(profile.packages),
        write_files: vec![server_unit.write_file(UNIT)],
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        ..Default::default()
    };
    let client = CloudConfig {
        packages: strings(profile.packages),
        write_files: vec![
            WriteFile::new(WAIT_TCP, wait_tcp_script(), "0755"),
            WriteFile::new(
                CLIENT_SCRIPT,
                client_script(
                    &server_host(options),
                    p.str("test-duration"),
                    p.str("parallel-streams"),
                ),
                "0755",
            ),
            client_unit.write_file(UNIT),
        ],
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        ..Default::default()
    };
    let service = role_service(
        &options.service_name(SERVICE_NAME),
        NAME,
        ROLE_SERVER,
        &[("iperf3", PORT)],
    );
    Ok(Box::new(ctx.server_client(
        RolePayload::new(server, &[UNIT]),
        RolePayload::new(client, &[UNIT]),
        service,
    )?))
}
