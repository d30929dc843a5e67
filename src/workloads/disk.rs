//! `disk`: fio mixed random and sequential I/O on a dedicated data disk
//! (`virtwork-disk.service`, disk serial `virtwork-disk` mounted at `/mnt/data`).

use super::params::{ParamDef, ParamSchema, StrRule};
use super::scripts::{bash_c, daemon_reload, disk_setup_script, enable_now, simple_service};
use super::{BuildContext, Workload, WorkloadOptions, WorkloadSettings, data_disk};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "disk";
pub const UNIT: &str = "virtwork-disk.service";
pub const DV_BASE: &str = "virtwork-disk-data";
pub const SERIAL: &str = "virtwork-disk";
pub const MOUNT: &str = "/mnt/data";
pub const SETUP_SCRIPT: &str = "/usr/local/bin/virtwork-disk-setup.sh";
pub const MIXED_JOB: &str = "/etc/fio/mixed-rw.fio";
pub const SEQ_JOB: &str = "/etc/fio/seq-write.fio";

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
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
        ],
    )
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

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let p = &ctx.params;
    let exec = bash_c(&format!(
        "while true; do fio {MIXED_JOB}; sleep 10; fio {SEQ_JOB}; sleep 10; done"
    ));
    let unit = simple_service(
        "Virtwork disk I/O workload",
        "network.target local-fs.target",
        &exec,
        10,
    );
    let config = CloudConfig {
        packages: vec!["fio".into()],
        write_files: vec![
            WriteFile::new(SETUP_SCRIPT, disk_setup_script(SERIAL, MOUNT), "0755"),
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
        ],
        runcmd: vec![
            vec![SETUP_SCRIPT.to_string()],
            daemon_reload(),
            enable_now(UNIT),
        ],
        user: None,
    };
    let mut workload = ctx.single(config)?;
    workload.data_disks = vec![data_disk(DV_BASE, SERIAL, options)];
    Ok(Box::new(workload))
}
