//! `cpu`: stress-ng CPU load on every VM, forever (`virtwork-cpu.service`), constant or
//! following a load profile. A level is stress-ng's `--cpu-load` percent of each CPU, and the
//! kernel caps the load a little above it (cgroup CFS bandwidth, in a cgroup of its own).
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
    meaning: "percent load of each CPU (stress-ng --cpu-load, CPU time capped 10 points above)",
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
            "stress-ng --cpu-load: percent load per CPU (its CPU time capped 10 points above)",
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

/// Milliseconds of each busy slice under a `--cpu-load` below 100 (`--cpu-load-slice`):
/// stress-ng's default slice is a count of method iterations, which under a slow CPU (a TCG
/// guest) ran for seconds, so a 10 % level arrived in lumps (a 2 s window read 71 %).
pub const CPU_LOAD_SLICE_MS: u32 = 20;

/// Points above the level at which the kernel caps the load's CPU time (cgroup CFS bandwidth,
/// per 100 ms period). stress-ng's `--cpu-load` loop times its busy slices in wall time, so a
/// slow or descheduled CPU still let 2 s windows of level 10 read 28-55 % with 20 ms slices;
/// the cap clips every such lump whatever the CPU's speed. It sits above the level, not at it:
/// stress-ng flat out under a quota at the level held low levels but stalled the guest in
/// bursts.
pub const CPU_CAP_POINTS: u32 = 10;

/// The stress-ng command line at a load of `load_percent` (`"$1"` in the level script).
pub fn command_line(load_percent: &str, method: &str) -> String {
    format!(
        "/usr/bin/stress-ng --cpu 0 --cpu-load {load_percent} --cpu-load-slice {CPU_LOAD_SLICE_MS} --cpu-method {method} --timeout 0"
    )
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

/// The cgroup under the unit's own that holds the load and its cap (cgroup v2, `Delegate=yes`).
pub const LOAD_CGROUP: &str = "load";
/// The cgroup under the unit's own that holds everything else in the unit: the profile driver.
pub const SUPERVISOR_CGROUP: &str = "supervisor";

/// The level script, steady or profiled: `$1` is the load percent of each CPU. It caps the
/// load's CPU time at [`CPU_CAP_POINTS`] above the level on every online CPU (the CPUs
/// `--cpu 0` starts stressors on; a cap of 100 % or more lifts it), then runs stress-ng at
/// the level. On the unified cgroup hierarchy the unit is delegated: the script moves itself
/// into [`LOAD_CGROUP`] and writes the cap to that cgroup's `cpu.max`, and whatever else runs in
/// the unit (the profile driver) moves to [`SUPERVISOR_CGROUP`], outside the cap. A driver held
/// to a low cap took 4-7 s of a TCG guest to stop one level and start the next; outside it, a
/// phase change costs what it costs at full speed, and the cap is one write, not a systemctl
/// run. Elsewhere (cgroup v1, or no `cpu` controller delegated) the whole unit is capped with
/// `systemctl set-property --runtime` (a reboot starts from the unit file, and the script sets
/// it again). A cap the kernel or systemd refuses fails the script, so the unit restarts
/// loudly instead of running without it.
pub fn level_script(method: &str) -> String {
    format!(
        "#!/bin/bash\n\
         # virtwork cpu at one level: $1 is the load percent of each CPU. stress-ng keeps the level;\n\
         # a CFS bandwidth cap {CPU_CAP_POINTS} points above it clips every lump a slow CPU lets through.\n\
         set -euo pipefail\n\
         CAP=\"\"\n\
         MAX=\"max 100000\"\n\
         if [ $(( $1 + {CPU_CAP_POINTS} )) -lt 100 ]; then CPUS=$(nproc); CAP=\"$(( ($1 + {CPU_CAP_POINTS}) * CPUS ))%\"; MAX=\"$(( ($1 + {CPU_CAP_POINTS}) * CPUS * 1000 )) 100000\"; fi\n\
         # On cgroup v2 only the load is capped, in {LOAD_CGROUP}/ under the unit's cgroup (Delegate=yes); the\n\
         # driver moves to {SUPERVISOR_CGROUP}/, so a low cap never slows the next phase change.\n\
         IFS=: read -r _ _ CGROUP < /proc/self/cgroup || true\n\
         UNIT_CGROUP=\"\"\n\
         case \"$CGROUP\" in\n\
         \x20 */{UNIT}) UNIT_CGROUP=\"/sys/fs/cgroup${{CGROUP}}\" ;;\n\
         \x20 */{UNIT}/{LOAD_CGROUP} | */{UNIT}/{SUPERVISOR_CGROUP}) UNIT_CGROUP=\"/sys/fs/cgroup${{CGROUP%/*}}\" ;;\n\
         esac\n\
         if [ -n \"$UNIT_CGROUP\" ] && [ -f /sys/fs/cgroup/cgroup.controllers ] \\\n\
         \x20 && mkdir -p \"$UNIT_CGROUP/{SUPERVISOR_CGROUP}\" \"$UNIT_CGROUP/{LOAD_CGROUP}\" \\\n\
         \x20 && echo $$ > \"$UNIT_CGROUP/{LOAD_CGROUP}/cgroup.procs\"; then\n\
         \x20 # The unit's own cgroup must be empty before its children get the cpu controller; a\n\
         \x20 # process the driver starts meanwhile is moved on the next try.\n\
         \x20 for _ in 1 2 3 4 5 6 7 8 9 10; do\n\
         \x20   while read -r PID; do echo \"$PID\" > \"$UNIT_CGROUP/{SUPERVISOR_CGROUP}/cgroup.procs\" 2>/dev/null || true; done < \"$UNIT_CGROUP/cgroup.procs\"\n\
         \x20   echo +cpu > \"$UNIT_CGROUP/cgroup.subtree_control\" 2>/dev/null && break\n\
         \x20 done\n\
         fi\n\
         if [ -n \"$UNIT_CGROUP\" ] && [ -f \"$UNIT_CGROUP/{LOAD_CGROUP}/cpu.max\" ]; then\n\
         \x20 echo \"$MAX\" > \"$UNIT_CGROUP/{LOAD_CGROUP}/cpu.max\"\n\
         else\n\
         \x20 systemctl set-property --runtime {UNIT} \"CPUQuota=${{CAP}}\"\n\
         fi\n\
         exec {}\n",
        command_line("\"$1\"", method)
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
    // Delegated, so the level script can cap the load in a cgroup of its own (not the driver).
    let mut unit =
        simple_service("Virtwork CPU stress workload", &exec, 10).service("Delegate", "yes");
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
