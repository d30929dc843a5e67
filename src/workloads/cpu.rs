//! `cpu`: stress-ng CPU load on every VM, forever (`virtwork-cpu.service`), constant or
//! following a load profile. A level is a percent of each CPU, held by the kernel: the unit's
//! `CPUQuota=` (cgroup CFS bandwidth) is set to it, and stress-ng runs at full load inside.
//!
//! Owns: the cpu params, the level script and the unit. Must not: drive a profile's phases
//! (the profile driver does) or know how verify judges the load.

use super::params::{ParamDef, ParamSchema, StrRule};
use super::profile_driver::{self, LevelScale};
use super::scripts::{daemon_reload, enable_now, simple_service, strings};
use super::{BuildContext, GuestFamily, RolePayload, Workload, WorkloadOptions, WorkloadSettings};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "cpu";
/// The unit file name in the guest.
pub const UNIT: &str = "virtwork-cpu.service";

/// stress-ng `--cpu-method` names (stress-ng 0.15; every later release keeps them), plus `all`.
pub const CPU_METHODS: &[&str] = &[
    "all",
    "ackermann",
    "apery",
    "bitops",
    "callfunc",
    "cdouble",
    "cfloat",
    "clongdouble",
    "collatz",
    "correlate",
    "crc16",
    "decimal32",
    "decimal64",
    "decimal128",
    "dither",
    "div8",
    "div16",
    "div32",
    "div64",
    "div128",
    "double",
    "euler",
    "explog",
    "factorial",
    "fibonacci",
    "fft",
    "fletcher16",
    "float",
    "float32",
    "float64",
    "float80",
    "float128",
    "floatconversion",
    "gamma",
    "gcd",
    "gray",
    "hamming",
    "hanoi",
    "hyperbolic",
    "idct",
    "int128",
    "int64",
    "int32",
    "int16",
    "int8",
    "int128float",
    "int128double",
    "int128longdouble",
    "int128decimal32",
    "int128decimal64",
    "int128decimal128",
    "int64float",
    "int64double",
    "int64longdouble",
    "int32float",
    "int32double",
    "int32longdouble",
    "intconversion",
    "ipv4checksum",
    "jmp",
    "lfsr32",
    "ln2",
    "logmap",
    "longdouble",
    "loop",
    "matrixprod",
    "nsqrt",
    "omega",
    "parity",
    "phi",
    "pi",
    "prime",
    "psi",
    "queens",
    "rand",
    "rand48",
    "rgb",
    "sieve",
    "stats",
    "sqrt",
    "trig",
    "union",
    "zeta",
];

/// What a load profile's level means for cpu.
pub const LEVELS: LevelScale = LevelScale {
    meaning: "percent load of each CPU (the unit's CPUQuota)",
    max: 100,
    default_low: 10,
    default_high: 90,
};

/// The param that sets the constant load (not read under a profile).
const STEADY_KEYS: &[&str] = &["cpu-load-percent"];

pub fn schema() -> ParamSchema {
    let mut defs = vec![
        ParamDef::int(
            "cpu-load-percent",
            100,
            1,
            100,
            "percent load per CPU (the unit's CPUQuota, stress-ng at full load inside)",
        ),
        ParamDef::string(
            "cpu-method",
            "all",
            StrRule::OneOf(CPU_METHODS),
            "stress-ng --cpu-method",
        ),
    ];
    defs.extend(profile_driver::param_defs(LEVELS));
    ParamSchema::new(NAME, defs)
}

/// The stress-ng command line the unit runs at every level: one stressor per online CPU at
/// full load. The level is not stress-ng's `--cpu-load`: its own busy/idle loop measures
/// bursts in wall time, and under a slow or descheduled CPU (a TCG guest on a shared host) a
/// 10 % level still read 28-55 % in 2 s windows with 20 ms slices. The kernel's CFS bandwidth
/// charges the cgroup's runtime per 100 ms period whatever the CPU's speed, so no 2 s window
/// of the load can exceed its quota.
pub fn command_line(method: &str) -> String {
    format!("/usr/bin/stress-ng --cpu 0 --cpu-method {method} --timeout 0")
}

/// What the cpu payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub packages: &'static [&'static str],
}

/// The per-family table: stress-ng has the same name and path everywhere.
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora | GuestFamily::Debian => Profile {
            packages: &["stress-ng"],
        },
    }
}

/// The level script, steady or profiled: `$1` is the load percent of each CPU. It sets the
/// unit's `CPUQuota=` to `$1` x the online CPUs (the CPUs `--cpu 0` starts stressors on; 100
/// lifts the quota), `--runtime` so a reboot starts from the unit file and the script sets it
/// again, then runs stress-ng at full load inside the quota. A quota systemd refuses fails
/// the script, so the unit restarts loudly instead of loading the guest at 100 %.
pub fn level_script(method: &str) -> String {
    format!(
        "#!/bin/bash\n\
         # virtwork cpu at one level: $1 is the load percent of each CPU, held by the kernel (the\n\
         # unit's CPUQuota, CFS bandwidth); stress-ng runs at full load inside it.\n\
         set -euo pipefail\n\
         QUOTA=\"\"\n\
         if [ \"$1\" -lt 100 ]; then QUOTA=\"$(( $1 * $(nproc) ))%\"; fi\n\
         systemctl set-property --runtime {UNIT} \"CPUQuota=${{QUOTA}}\"\n\
         exec {}\n",
        command_line(method)
    )
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let method = ctx.params.str("cpu-method");
    let load = profile_driver::from_params(NAME, &ctx.params, &settings.params, STEADY_KEYS)?;
    // The steady load runs the level script too: one path sets every cpu level.
    let (exec, mut write_files) = match &load {
        None => {
            let script = profile_driver::level_script_path(NAME);
            (
                format!("{script} {}", ctx.params.str("cpu-load-percent")),
                vec![WriteFile::new(&script, level_script(method), "0755")],
            )
        }
        Some(shape) => profile_driver::driven(NAME, shape, level_script(method)),
    };
    // No network needed: ordered after basic system start-up only (the default).
    let mut unit = simple_service("Virtwork CPU stress workload", &exec, 10);
    if load.is_some() {
        unit = profile_driver::with_driver_settings(unit);
    }
    write_files.push(unit.write_file(UNIT));
    let config = CloudConfig {
        packages: strings(profile.packages),
        write_files,
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        ..Default::default()
    };
    Ok(Box::new(ctx.single(RolePayload::new(config, &[UNIT]))?))
}
