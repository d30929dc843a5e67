//! `chaos-network`: tc/netem latency and packet loss on the interface that carries a steady
//! probe flow, with the flow's measured latency and loss logged to the journal.
//!
//! Two units: `virtwork-chaos-network.service` (`Type=oneshot`, `RemainAfterExit=yes`)
//! installs the netem qdisc on the interface the route to the probe target uses, and keeps
//! it until the unit is stopped; `virtwork-chaos-network-probe.service` opens a TCP
//! connection to the target every `probe-interval` seconds and logs, per window of
//! [`PROBE_WINDOW`] probes, how many were answered and their connect times. A TCP handshake
//! needs the impaired interface's egress (the SYN), so the injected delay and loss show up in
//! those numbers. The target is a param: by default the network workload's server Service
//! when that workload is in the same run, else the guest's DNS server (port 53), which every
//! cluster provides.

use super::network;
use super::params::{ParamDef, ParamSchema, StrRule, parse_probe_target};
use super::scripts::{Unit, after_network_online, argv, daemon_reload, enable_now, strings};
use super::{BuildContext, GuestFamily, RolePayload, Workload, WorkloadOptions, WorkloadSettings};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "chaos-network";
pub const UNIT: &str = "virtwork-chaos-network.service";
pub const PROBE_UNIT: &str = "virtwork-chaos-network-probe.service";
pub const START_SCRIPT: &str = "/usr/local/bin/virtwork-chaos-network-start.sh";
pub const STOP_SCRIPT: &str = "/usr/local/bin/virtwork-chaos-network-stop.sh";
pub const PROBE_SCRIPT: &str = "/usr/local/bin/virtwork-chaos-network-probe";
/// Where the start script records the impaired interface (for the stop script).
pub const DEVICE_FILE: &str = "/run/virtwork-chaos-network.dev";
/// Probes per logged summary line.
pub const PROBE_WINDOW: u32 = 60;
/// A probe not answered within this many seconds counts as lost (a lost SYN is resent
/// after 1 s, so it always exceeds this).
pub const PROBE_TIMEOUT_SECS: f64 = 0.9;
/// Port probed on the guest's DNS server when no target is given.
pub const DNS_PORT: u16 = 53;

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
            ParamDef::string(
                "target",
                "auto",
                StrRule::ProbeTarget,
                "host:port the probe flow connects to; auto = the network workload's server Service when it runs in the same plan, else the guest's DNS server port 53",
            ),
            ParamDef::int(
                "probe-interval",
                1,
                1,
                3600,
                "seconds between probe connections",
            ),
        ],
    )
}

/// Where the probe flow goes: a host and port, or the guest's own DNS server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeTarget {
    HostPort(String, u16),
    /// The first non-loopback nameserver the guest resolves with, port [`DNS_PORT`].
    GuestDns,
}

impl ProbeTarget {
    /// The `target` param resolved against the plan: `auto` aims at the network workload's
    /// server Service when that workload is planned too.
    pub fn resolve(param: &str, options: &WorkloadOptions) -> ProbeTarget {
        if let Some((host, port)) = parse_probe_target(param) {
            return ProbeTarget::HostPort(host.to_string(), port);
        }
        if options.planned_workloads.iter().any(|w| w == network::NAME) {
            ProbeTarget::HostPort(network::server_host(options), network::PORT)
        } else {
            ProbeTarget::GuestDns
        }
    }

    /// The two script arguments: host (`-` for the guest's DNS server) and port.
    pub fn args(&self) -> String {
        match self {
            ProbeTarget::HostPort(host, port) => format!("{host} {port}"),
            ProbeTarget::GuestDns => format!("- {DNS_PORT}"),
        }
    }
}

/// Installs (or replaces) the netem qdisc on the interface routing to the probe target.
pub fn start_script(target: &ProbeTarget, latency_ms: &str, loss_percent: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork chaos-network: install netem delay/loss on the interface the probe flow uses.
set -euo pipefail

DEV=$({PROBE_SCRIPT} --device {args})
modprobe sch_netem 2>/dev/null || true
tc qdisc replace dev "$DEV" root netem delay {latency_ms}ms loss {loss_percent}% limit 1000
echo "$DEV" > {DEVICE_FILE}
echo "netem installed on ${{DEV}}: delay {latency_ms}ms loss {loss_percent}%"
tc qdisc show dev "$DEV"
"#,
        args = target.args(),
    )
}

/// Removes the netem qdisc; always succeeds.
pub fn stop_script() -> String {
    format!(
        r#"#!/bin/bash
# virtwork chaos-network: remove the netem qdisc installed by the start script.
if [ -s {DEVICE_FILE} ]; then
  DEV=$(cat {DEVICE_FILE})
  tc qdisc del dev "$DEV" root 2>/dev/null || true
  rm -f {DEVICE_FILE}
  echo "netem removed from ${{DEV}}"
fi
exit 0
"#
    )
}

/// The probe: a Python program (Python 3 is on every cloud-init guest) so connect times are
/// measured in-process, without a process start per probe distorting them.
// long: one Python program as a single literal; splitting it would scatter the script.
pub fn probe_script() -> String {
    format!(
        r#"#!/usr/bin/python3
"""virtwork chaos-network probe flow.

Usage: virtwork-chaos-network-probe HOST PORT INTERVAL   (HOST "-": the guest's DNS server)
       virtwork-chaos-network-probe --device HOST PORT    (print the interface to HOST)

Connects to HOST:PORT every INTERVAL seconds and logs, every {window} probes, how many were
answered (a refused connection is an answer too) within {timeout} s and their connect times.
Exits non-zero when a whole window goes unanswered, so systemd shows the flow as failed.
"""
import socket
import subprocess
import sys
import time

WINDOW = {window}
TIMEOUT = {timeout}


def guest_nameserver():
    for path in ("/run/systemd/resolve/resolv.conf", "/etc/resolv.conf"):
        try:
            with open(path, encoding="utf-8") as conf:
                for line in conf:
                    fields = line.split()
                    if len(fields) >= 2 and fields[0] == "nameserver":
                        if not fields[1].startswith("127.") and ":" not in fields[1]:
                            return fields[1]
        except OSError:
            continue
    sys.exit("no non-loopback IPv4 nameserver in /run/systemd/resolve/resolv.conf or /etc/resolv.conf")


def resolve(host, port):
    name = guest_nameserver() if host == "-" else host
    infos = socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)
    return name, infos[0][4][0]


def device(address):
    route = subprocess.run(
        ["ip", "-o", "route", "get", address], check=True, capture_output=True, text=True
    ).stdout.split()
    return route[route.index("dev") + 1]


def probe(address, port):
    start = time.perf_counter()
    try:
        with socket.create_connection((address, port), timeout=TIMEOUT):
            pass
    except ConnectionRefusedError:
        pass
    except OSError:
        return None
    return (time.perf_counter() - start) * 1000.0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--device":
        print(device(resolve(sys.argv[2], int(sys.argv[3]))[1]))
        return
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    port, interval = int(sys.argv[2]), float(sys.argv[3])
    name, address = resolve(sys.argv[1], port)
    dev = device(address)
    print(f"probing {{name}} ({{address}}) port {{port}} through {{dev}} every {{interval:g}}s", flush=True)
    window = 1
    while True:
        rtts, sent = [], 0
        while sent < WINDOW:
            started = time.monotonic()
            rtt = probe(address, port)
            sent += 1
            if rtt is not None:
                rtts.append(rtt)
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
        lost = sent - len(rtts)
        stats = "rtt_ms_avg=- rtt_ms_min=- rtt_ms_max=-"
        if rtts:
            stats = (
                f"rtt_ms_avg={{sum(rtts) / len(rtts):.1f}} rtt_ms_min={{min(rtts):.1f}} "
                f"rtt_ms_max={{max(rtts):.1f}}"
            )
        print(
            f"probe window={{window}} target={{address}}:{{port}} dev={{dev}} sent={{sent}} "
            f"answered={{len(rtts)}} lost={{lost}} loss_pct={{100.0 * lost / sent:.1f}} {{stats}}",
            flush=True,
        )
        if not rtts:
            sys.exit(f"no probe to {{address}}:{{port}} answered in window {{window}}")
        window += 1


if __name__ == "__main__":
    main()
"#,
        window = PROBE_WINDOW,
        timeout = PROBE_TIMEOUT_SECS,
    )
}

/// What the chaos-network payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// `tc` and `ip`; Python for the probe.
    pub packages: &'static [&'static str],
    /// A first-boot command that installs the netem qdisc module, where the kernel package
    /// does not ship it.
    pub netem_module_install: Option<&'static str>,
}

/// The per-family table: Fedora packages `tc` separately (`iproute-tc`) and ships
/// `sch_netem` in `kernel-modules-extra` for the running kernel; Debian's `iproute2` has
/// `tc` and its kernels include `sch_netem`.
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora => Profile {
            packages: &["iproute-tc", "python3"],
            netem_module_install: Some("dnf install -y \"kernel-modules-extra-$(uname -r)\""),
        },
        GuestFamily::Debian => Profile {
            packages: &["iproute2", "python3"],
            netem_module_install: None,
        },
    }
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let target = ProbeTarget::resolve(p.str("target"), options);
    let netem = after_network_online(Unit::new("Virtwork network chaos workload (tc/netem)"))
        .service("Type", "oneshot")
        .service("RemainAfterExit", "yes")
        .service("ExecStart", START_SCRIPT)
        .service("ExecStop", STOP_SCRIPT)
        .service("Restart", "on-failure")
        .service("RestartSec", "10");
    let probe = Unit::new("Virtwork network chaos probe flow (latency and loss)")
        .unit("Requires", UNIT)
        .unit("After", UNIT)
        .service("Type", "simple")
        .service(
            "ExecStart",
            format!(
                "{PROBE_SCRIPT} {} {}",
                target.args(),
                p.str("probe-interval")
            ),
        )
        .service("Restart", "always")
        .service("RestartSec", "10");
    let mut runcmd = Vec::new();
    if let Some(install) = profile.netem_module_install {
        runcmd.push(argv(&["bash", "-c", install]));
    }
    runcmd.extend([daemon_reload(), enable_now(UNIT), enable_now(PROBE_UNIT)]);
    let config = CloudConfig {
        packages: strings(profile.packages),
        write_files: vec![
            WriteFile::new(PROBE_SCRIPT, probe_script(), "0755"),
            WriteFile::new(
                START_SCRIPT,
                start_script(&target, p.str("latency-ms"), p.str("packet-loss-percent")),
                "0755",
            ),
            WriteFile::new(STOP_SCRIPT, stop_script(), "0755"),
            netem.write_file(UNIT),
            probe.write_file(PROBE_UNIT),
        ],
        runcmd,
        ..Default::default()
    };
    Ok(Box::new(
        ctx.single(RolePayload::new(config, &[UNIT, PROBE_UNIT]))?,
    ))
}
