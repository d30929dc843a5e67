//! `chaos-network`: tc/netem latency and packet loss on the default-route interface.
//!
//! Unlike the reference, the impairment stays installed: the unit is `Type=oneshot` with
//! `RemainAfterExit=yes`, the start script uses `tc qdisc replace` (idempotent restarts) and
//! only `systemctl stop` removes the qdisc.

use super::params::{ParamDef, ParamSchema, StrRule};
use super::scripts::{Unit, argv, daemon_reload, enable_now};
use super::{BuildContext, Workload, WorkloadOptions, WorkloadSettings};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "chaos-network";
pub const UNIT: &str = "virtwork-chaos-network.service";
pub const START_SCRIPT: &str = "/usr/local/bin/virtwork-chaos-network-start.sh";
pub const STOP_SCRIPT: &str = "/usr/local/bin/virtwork-chaos-network-stop.sh";

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::int("latency-ms", 100, 0, 60_000, "netem delay in milliseconds"),
            ParamDef::string(
                "packet-loss-percent",
                "5.0",
                StrRule::Percent,
                "netem loss percent",
            ),
        ],
    )
}

const DEFAULT_DEV: &str = r#"DEV=$(ip route show default | awk '{print $5; exit}')"#;

/// Installs (or replaces) the netem qdisc.
pub fn start_script(latency_ms: &str, loss_percent: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork chaos-network: install netem delay/loss on the default-route interface.
set -euo pipefail

{DEFAULT_DEV}
if [ -z "$DEV" ]; then
  echo "no default route interface found" >&2
  exit 1
fi
modprobe sch_netem 2>/dev/null || true
/usr/sbin/tc qdisc replace dev "$DEV" root netem delay {latency_ms}ms loss {loss_percent}% limit 1000
echo "netem installed on ${{DEV}}: delay {latency_ms}ms loss {loss_percent}%"
"#
    )
}

/// Removes the netem qdisc; always succeeds.
pub fn stop_script() -> String {
    format!(
        r#"#!/bin/bash
# virtwork chaos-network: remove the netem qdisc from the default-route interface.
{DEFAULT_DEV}
if [ -n "$DEV" ]; then
  /usr/sbin/tc qdisc del dev "$DEV" root 2>/dev/null || true
fi
exit 0
"#
    )
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let p = &ctx.params;
    let unit = Unit::new("Virtwork network chaos workload (tc/netem)")
        .unit("After", "network-online.target")
        .unit("Wants", "network-online.target")
        .service("Type", "oneshot")
        .service("RemainAfterExit", "yes")
        .service("ExecStart", START_SCRIPT)
        .service("ExecStop", STOP_SCRIPT)
        .service("Restart", "on-failure")
        .service("RestartSec", "10");
    let config = CloudConfig {
        packages: vec!["iproute-tc".into()],
        write_files: vec![
            WriteFile::new(
                START_SCRIPT,
                start_script(p.str("latency-ms"), p.str("packet-loss-percent")),
                "0755",
            ),
            WriteFile::new(STOP_SCRIPT, stop_script(), "0755"),
            unit.write_file(UNIT),
        ],
        runcmd: vec![
            argv(&[
                "bash",
                "-c",
                "dnf install -y \"kernel-modules-extra-$(uname -r)\"",
            ]),
            daemon_reload(),
            enable_now(UNIT),
        ],
        user: None,
    };
    Ok(Box::new(ctx.single(config)?))
}
