//! `memory`: stress-ng virtual-memory stressors on every VM (`virtwork-memory.service`).

use super::params::{ParamDef, ParamSchema, StrRule};
use super::profile_driver::{self, LevelScale};
use super::scripts::{daemon_reload, enable_now, simple_service, strings};
use super::{BuildContext, GuestFamily, RolePayload, Workload, WorkloadOptions, WorkloadSettings};
use crate::cloudinit::CloudConfig;
use crate::error::Result;

pub const NAME: &str = "memory";
pub const UNIT: &str = "virtwork-memory.service";

/// stress-ng `--vm-method` names (stress-ng 0.15; kept by later releases), plus `all`.
pub const VM_METHODS: &[&str] = &[
    "all",
    "cache-lines",
    "cache-stripe",
    "checkerboard",
    "flip",
    "fwdrev",
    "galpat-0",
    "galpat-1",
    "gray",
    "grayflip",
    "rowhammer",
    "incdec",
    "inc-nybble",
    "lfsr32",
    "rand-set",
    "rand-sum",
    "read64",
    "ror",
    "swap",
    "move-inv",
    "modulo-x",
    "mscan",
    "wrrd128nt",
    "prime-0",
    "prime-1",
    "prime-gray-0",
    "prime-gray-1",
    "prime-incdec",
    "walk-0d",
    "walk-1d",
    "walk-0a",
    "walk-1a",
    "write64",
    "write64nt",
    "write1024v",
    "zero-one",
];

/// What a load profile's level means for memory.
pub const LEVELS: LevelScale = LevelScale {
    meaning: "percent of the guest's available memory the workers hold (stress-ng --vm-bytes)",
    max: 100,
    default_low: 20,
    default_high: 80,
};

/// The param that sets the constant load (not read under a profile).
const STEADY_KEYS: &[&str] = &["memory-percent"];

pub fn schema() -> ParamSchema {
    let mut defs = vec![
        ParamDef::int(
            "memory-percent",
            80,
            1,
            100,
            "stress-ng --vm-bytes as a percent of memory",
        ),
        ParamDef::int(
            "vm-stressors",
            1,
            0,
            1024,
            "stress-ng --vm workers (0 = one per CPU)",
        ),
        ParamDef::string(
            "vm-method",
            "all",
            StrRule::OneOf(VM_METHODS),
            "stress-ng --vm-method",
        ),
    ];
    defs.extend(profile_driver::param_defs(LEVELS));
    ParamSchema::new(NAME, defs)
}

/// The stress-ng command line the unit runs (steady and at each level of a profile).
///
/// `--vm-keep`: without it every vm worker unmaps its buffer and maps it afresh on each pass
/// (stress-ng's man page: "do not continually unmap and map memory, just keep on re-writing
/// to it"), so the memory it holds is a sawtooth from almost nothing to the asked size: a 1 GiB
/// worker's RSS swung 2-1026 MiB every half second on the host, and a guest at level 70 showed
/// 24-74 % of its memory in use within one phase. Kept, the RSS held 1025-1026 MiB from the
/// first second on and the guest holds its level (docs/workloads.md, "what a level means").
/// `--vm-populate` (MAP_POPULATE) has the kernel fault the whole buffer in at the mapping
/// instead of one fault per page on the first pass: a TCG guest took 20-25 s to reach 80 %
/// without it, about 2 s with it.
pub fn command_line(stressors: &str, percent: &str, method: &str) -> String {
    format!(
        "/usr/bin/stress-ng --vm {stressors} --vm-bytes {percent}% --vm-keep --vm-populate --vm-method {method} --timeout 0"
    )
}

/// What the memory payload needs on each guest family.
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

/// The level script of a profiled memory unit: stress-ng holding the percent given as `$1`.
pub fn level_script(stressors: &str, method: &str) -> String {
    format!(
        "#!/bin/bash\n# virtwork memory at one level of its load profile: $1 is the percent of available memory.\nexec {}\n",
        command_line(stressors, "\"$1\"", method)
    )
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let (stressors, method) = (p.str("vm-stressors"), p.str("vm-method"));
    let load = profile_driver::from_params(NAME, p, &settings.params, STEADY_KEYS)?;
    let (exec, mut write_files) = match &load {
        // `%` is a systemd specifier: the unit needs `%%` for stress-ng to see one `%`.
        None => (
            command_line(stressors, p.str("memory-percent"), method).replace('%', "%%"),
            Vec::new(),
        ),
        Some(shape) => profile_driver::driven(NAME, shape, level_script(stressors, method)),
    };
    let mut unit = simple_service("Virtwork memory stress workload", &exec, 10);
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
