//! `network`: iperf3 servers and clients in pairs; clients reach the servers through the
//! `virtwork-iperf3-server` Service, which selects only this workload's server VMs.

use super::params::{ParamDef, ParamSchema};
use super::scripts::{bash_c, daemon_reload, enable_now, simple_service};
use super::{BuildContext, ROLE_SERVER, Workload, WorkloadOptions, WorkloadSettings, role_service};
use crate::cloudinit::CloudConfig;
use crate::error::Result;

pub const NAME: &str = "network";
pub const UNIT: &str = "virtwork-network.service";
pub const SERVICE_NAME: &str = "virtwork-iperf3-server";
pub const PORT: u16 = 5201;

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

/// The client loop's iperf3 command line.
pub fn client_command(namespace: &str, duration: &str, streams: &str) -> String {
    format!(
        "iperf3 -c {SERVICE_NAME}.{namespace}.svc.cluster.local -t {duration} -P {streams} --bidir"
    )
}

fn config(unit_text: super::scripts::Unit) -> CloudConfig {
    CloudConfig {
        packages: vec!["iperf3".into()],
        write_files: vec![unit_text.write_file(UNIT)],
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        user: None,
    }
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let p = &ctx.params;
    let server = simple_service(
        "Virtwork iperf3 server",
        "network.target",
        "/usr/bin/iperf3 -s",
        10,
    );
    let client_loop = format!(
        "while true; do {}; sleep 10; done",
        client_command(
            &options.namespace,
            p.str("test-duration"),
            p.str("parallel-streams")
        )
    );
    let client = simple_service(
        "Virtwork iperf3 client",
        "network.target",
        &bash_c(&client_loop),
        10,
    );
    let service = role_service(SERVICE_NAME, NAME, ROLE_SERVER, &[("iperf3", PORT)]);
    Ok(Box::new(ctx.server_client(
        config(server),
        config(client),
        service,
    )?))
}
