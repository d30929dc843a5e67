//! `disk`: fio mixed random and sequential I/O on a dedicated data disk
//! (`virtwork-disk.service`, disk serial `virtwork-disk` mounted at `/mnt/data` by
//! `mnt-data.mount`). The unit requires that mount and checks it before every fio run, so a
//! missing or unmountable disk fails the unit instead of loading the root disk. Under a load
//! profile the levels are IOPS, applied as fio's `rate_iops`, and the unit lays out fio's files
//! before its driver starts, so restarting fio at a phase change never restarts the layout.

use super::params::{ParamDef, ParamSchema, StrRule};
use super::profile_driver::{self, LevelScale};
use super::scripts::{DataMount, daemon_reload, enable_now, simple_service, strings};
use super::{
    BuildContext, GuestFamily, RolePayload, Workload, WorkloadOptions, WorkloadSettings, data_disk,
};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "disk";
pub const UNIT: &str = "virtwork-disk.service";
pub const DV_BASE: &str = "virtwork-disk-data";
pub const SERIAL: &str = "virtwork-disk";
pub const MOUNT: &str = "/mnt/data";
/// The fio loop the unit runs.
pub const LOAD_SCRIPT: &str = "/usr/local/bin/virtwork-disk-load.sh";
pub const MIXED_JOB: &str = "/etc/fio/mixed-rw.fio";
pub const SEQ_JOB: &str = "/etc/fio/seq-write.fio";

/// What a load profile's level means for disk.
pub const LEVELS: LevelScale = LevelScale {
    meaning: "IOPS of the fio runs (fio rate_iops, shared by each job's processes)",
    max: 1_000_000,
    default_low: 100,
    default_high: 2000,
};

/// Where a profiled unit's level script writes the rate-limited copies of the job files.
pub const RATED_JOB_DIR: &str = "/run/virtwork-disk-jobs";

pub fn schema() -> ParamSchema {
    let mut defs = vec![
        ParamDef::string(
            "block-size-rw",
            "4k",
            StrRule::BlockSize,
            "fio bs of the mixed random job",
        ),
        ParamDef::string(
            "block-size-seq",
            "128k",
            StrRule::BlockSize,
            "fio bs of the sequential write job",
        ),
        ParamDef::int("rwmixread", 70, 0, 100, "percent reads in the mixed job"),
        ParamDef::int("numjobs", 4, 1, 256, "fio numjobs of the mixed job"),
        ParamDef::int("runtime", 300, 1, 604_800, "seconds per fio job run"),
    ];
    defs.extend(profile_driver::param_defs(LEVELS));
    ParamSchema::new(NAME, defs)
}

fn global_section() -> String {
    format!("[global]\nioengine=libaio\ndirect=1\ndirectory={MOUNT}\nsize=1G\n")
}

/// The mixed random read/write fio job file.
pub fn mixed_job(rwmixread: &str, block_size: &str, numjobs: &str, runtime: &str) -> String {
    format!(
        "{}\n[mixed-rw]\nrw=randrw\nrwmixread={rwmixread}\nbs={block_size}\nnumjobs={numjobs}\nruntime={runtime}\ntime_based\ngroup_reporting\n",
        global_section()
    )
}

/// The sequential write fio job file (two jobs, fixed).
pub fn seq_job(block_size: &str, runtime: &str) -> String {
    format!(
        "{}\n[seq-write]\nrw=write\nbs={block_size}\nnumjobs=2\nruntime={runtime}\ntime_based\ngroup_reporting\n",
        global_section()
    )
}

/// The load loop: before each fio run, refuse to run unless the data disk is mounted at
/// the job directory; any fio failure ends the unit (systemd restarts it and `systemctl`
/// shows the failure) instead of looping on errors.
pub fn load_script(disk: &DataMount) -> String {
    format!(
        r#"#!/bin/bash
# virtwork disk: fio mixed random and sequential I/O on the data disk, forever.
set -euo pipefail

{loop}"#,
        loop = fio_loop(disk, MIXED_JOB, SEQ_JOB),
    )
}

fn fio_loop(disk: &DataMount, mixed: &str, seq: &str) -> String {
    format!(
        r#"while true; do
  {require}
  fio {mixed}
  sleep {pause}
  {require}
  fio {seq}
  sleep {pause}
done
"#,
        require = disk.require_command(),
        pause = crate::signals::contract::FIO_PAUSE_SECS,
    )
}

/// The level script of a profiled disk unit: the load loop on copies of the job files that
/// cap each job's processes at their share of the IOPS given as `$1`. The mixed job's cap is
/// split into reads and writes by `rwmixread`: fio applies a single `rate_iops` value to reads
/// and to writes each, so one value would let a randrw job issue twice the level, half reads.
pub fn level_script(disk: &DataMount, numjobs: &str, rwmixread: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork disk at one level of its load profile: $1 is the IOPS the fio runs may issue.
set -euo pipefail

LEVEL="$1"
rate_per_process() {{
  local rate=$(($1 / $2))
  if [ "$rate" -lt 1 ]; then rate=1; fi
  echo "$rate"
}}
READ_IOPS=$((LEVEL * {rwmixread} / 100))
WRITE_IOPS=$((LEVEL - READ_IOPS))
mkdir -p {RATED_JOB_DIR}
# Each job file ends with its one job's section, so an appended option applies to that job.
# rate_iops=<reads>,<writes>: fio caps each direction on its own.
{{ cat {MIXED_JOB}; echo "rate_iops=$(rate_per_process "$READ_IOPS" {numjobs}),$(rate_per_process "$WRITE_IOPS" {numjobs})"; }} > {RATED_JOB_DIR}/mixed-rw.fio
{{ cat {SEQ_JOB}; echo "rate_iops=$(rate_per_process "$LEVEL" 2)"; }} > {RATED_JOB_DIR}/seq-write.fio

{loop}"#,
        loop = fio_loop(
            disk,
            &format!("{RATED_JOB_DIR}/mixed-rw.fio"),
            &format!("{RATED_JOB_DIR}/seq-write.fio")
        ),
    )
}

/// Lays out the mixed job's files (fio `create_only`) before a profiled unit's driver starts.
/// The driver restarts fio at every phase change, and fio deletes a half-written file and lays
/// it out again from the start: left to the level script, a layout longer than a phase (1 GiB
/// per process took about 25 s in a TCG guest) never finished and no phase ever ran its I/O.
/// Files already laid out are kept, so a restarted unit passes this at once.
pub fn layout_command() -> String {
    format!("/usr/bin/fio --create_only=1 {MIXED_JOB}")
}

/// What the disk payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub packages: &'static [&'static str],
}

/// The per-family table: fio (libaio engine included) and xfsprogs for `mkfs.xfs`.
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora | GuestFamily::Debian => Profile {
            packages: &["fio", "xfsprogs"],
        },
    }
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let disk = DataMount::new(SERIAL, MOUNT);
    let load = profile_driver::from_params(NAME, p, &settings.params, &[])?;
    let mut write_files = disk.files();
    let exec = match &load {
        None => {
            write_files.push(WriteFile::new(LOAD_SCRIPT, load_script(&disk), "0755"));
            LOAD_SCRIPT.to_string()
        }
        Some(shape) => {
            let (exec, files) = profile_driver::driven(
                NAME,
                shape,
                level_script(&disk, p.str("numjobs"), p.str("rwmixread")),
            );
            write_files.extend(files);
            exec
        }
    };
    let mut unit = simple_service("Virtwork disk I/O workload", &exec, 10)
        .unit("RequiresMountsFor", MOUNT)
        .service("ExecStartPre", disk.require_command());
    if load.is_some() {
        unit = profile_driver::with_driver_settings(unit)
            .service("ExecStartPre", layout_command())
            // Laying out 1 GiB per process takes minutes on a slow disk.
            .service("TimeoutStartSec", "infinity");
    }
    write_files.extend([
        WriteFile::new(
            MIXED_JOB,
            mixed_job(
                p.str("rwmixread"),
                p.str("block-size-rw"),
                p.str("numjobs"),
                p.str("runtime"),
            ),
            "0644",
        ),
        WriteFile::new(
            SEQ_JOB,
            seq_job(p.str("block-size-seq"), p.str("runtime")),
            "0644",
        ),
        unit.write_file(UNIT),
    ]);
    let config = CloudConfig {
        packages: strings(profile.packages),
        write_files,
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        ..Default::default()
    };
    let mut workload = ctx.single(RolePayload::new(config, &[UNIT]))?;
    workload.data_disks = vec![data_disk(DV_BASE, SERIAL, options)];
    Ok(Box::new(workload))
}
