//! `network`: iperf3 servers and clients in pairs; clients reach the servers through the
//! run's `virtwork-iperf3-server-<run tag>` Service, which selects only this run's server VMs.
//!
//! A client unit waits (`activating`) until the Service accepts connections, then loops
//! iperf3 runs; it tolerates isolated failed runs (an iperf3 server serves one client at a
//! time, so a run can meet a busy server) but fails after [`MAX_CONSECUTIVE_FAILURES`] in a
//! row, so a client that cannot reach any server shows as failed rather than running idle.
//! Under a load profile the clients' levels are bitrates (iperf3 `-b`); servers are unchanged.

use super::params::{ParamDef, ParamSchema};
use super::profile_driver::{self, LevelScale};
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

/// What a load profile's level means for network.
pub const LEVELS: LevelScale = LevelScale {
    meaning: "Mbit/s each client sends in each direction, shared by its streams (iperf3 -b)",
    max: 100_000,
    default_low: 100,
    default_high: 1000,
};

pub fn schema() -> ParamSchema {
    let mut defs = vec![
        ParamDef::int(
            "parallel-streams",
            4,
            1,
            128,
            "iperf3 -P parallel client streams",
        ),
        ParamDef::int("test-duration", 60, 1, 86_400, "iperf3 -t seconds per test"),
    ];
    defs.extend(profile_driver::param_defs(LEVELS));
    ParamSchema::new(NAME, defs)
}

/// The fully qualified name of this run's server Service.
pub fn server_host(options: &WorkloadOptions) -> String {
    options.service_host(SERVICE_NAME)
}

/// The client loop's iperf3 command line.
pub fn client_command(server: &str, duration: &str, streams: &str) -> String {
    format!("iperf3 -c {server} -t {duration} -P {streams} --bidir")
}

/// The client loop.
pub fn client_script(server: &str, duration: &str, streams: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork network client: iperf3 runs against the server Service, forever.
set -uo pipefail

{loop}"#,
        loop = client_loop(&client_command(server, duration, streams)),
    )
}

/// The level script of a profiled client: the client loop with each stream capped at its
/// share of the Mbit/s given as `$1`.
pub fn level_script(server: &str, duration: &str, streams: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork network client at one level of its load profile: $1 is the Mbit/s to send.
set -uo pipefail

PER_STREAM=$(($1 / {streams}))
if [ "$PER_STREAM" -lt 1 ]; then PER_STREAM=1; fi
{loop}"#,
        loop = client_loop(&format!(
            "{} -b \"${{PER_STREAM}}M\"",
            client_command(server, duration, streams)
        )),
    )
}

fn client_loop(command: &str) -> String {
    format!(
        r#"FAILURES=0
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
    let (duration, streams) = (p.str("test-duration"), p.str("parallel-streams"));
    let load = profile_driver::from_params(NAME, p, &settings.params, &[])?;
    let (client_exec, mut client_files) = match &load {
        None => (
            CLIENT_SCRIPT.to_string(),
            vec![WriteFile::new(
                CLIENT_SCRIPT,
                client_script(&server_host(options), duration, streams),
                "0755",
            )],
        ),
        Some(shape) => profile_driver::driven(
            NAME,
            shape,
            level_script(&server_host(options), duration, streams),
        ),
    };
    let mut client_unit =
        after_network_online(simple_service("Virtwork iperf3 client", &client_exec, 10))
            .service(
                "ExecStartPre",
                format!("{WAIT_TCP} {} {PORT}", server_host(options)),
            )
            .service("TimeoutStartSec", "infinity");
    if load.is_some() {
        client_unit = profile_driver::with_driver_settings(client_unit);
    }
    client_files.insert(0, WriteFile::new(WAIT_TCP, wait_tcp_script(), "0755"));
    client_files.push(client_unit.write_file(UNIT));
    let server = CloudConfig {
        packages: strings(profile.packages),
        write_files: vec![server_unit.write_file(UNIT)],
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        ..Default::default()
    };
    let client = CloudConfig {
        packages: strings(profile.packages),
        write_files: client_files,
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
