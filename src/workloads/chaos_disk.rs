//! `chaos-disk`: repeatedly fills a data disk to a percentage, holds, releases, waits.

use super::params::{ParamDef, ParamSchema, StrRule};
use super::scripts::{daemon_reload, disk_setup_script, enable_now, simple_service};
use super::{BuildContext, Workload, WorkloadOptions, WorkloadSettings, data_disk};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "chaos-disk";
pub const UNIT: &str = "virtwork-chaos-disk.service";
pub const DV_BASE: &str = "virtwork-chaos-disk-data";
pub const SERIAL: &str = "virtwork-chdisk";
pub const SETUP_SCRIPT: &str = "/usr/local/bin/virtwork-disk-setup.sh";
pub const CHAOS_SCRIPT: &str = "/usr/local/bin/chaos-disk.sh";

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::string(
                "mount",
                "/mnt/data",
                StrRule::MountPath,
                "where the data disk is mounted",
            ),
            ParamDef::int(
                "fill-percent",
                90,
                1,
                100,
                "fill the disk to this percent of its size",
            ),
            ParamDef::int("fill-sleep", 60, 1, 86_400, "seconds to hold the disk full"),
            ParamDef::int(
                "release-sleep",
                30,
                1,
                86_400,
                "seconds to wait after releasing",
            ),
        ],
    )
}

/// The fill/release loop.
pub fn chaos_script(
    mount: &str,
    fill_percent: &str,
    fill_sleep: &str,
    release_sleep: &str,
) -> String {
    format!(
        r#"#!/bin/bash
# virtwork chaos-disk: fill the data disk to FILL_PERCENT, hold, release, wait, repeat.
set -euo pipefail

MOUNT_POINT="{mount}"
FILL_PERCENT={fill_percent}
FILL_FILE="${{MOUNT_POINT}}/chaos-disk-fill"
FILL_SLEEP={fill_sleep}
RELEASE_SLEEP={release_sleep}

while true; do
  TOTAL_KB=$(df -k "$MOUNT_POINT" | awk 'NR == 2 {{ print $2 }}')
  USED_KB=$(df -k "$MOUNT_POINT" | awk 'NR == 2 {{ print $3 }}')
  TARGET_KB=$((TOTAL_KB * FILL_PERCENT / 100))
  FILL_KB=$((TARGET_KB - USED_KB))
  if [ "$FILL_KB" -gt 0 ]; then
    echo "Filling ${{MOUNT_POINT}} with ${{FILL_KB}}K (target ${{FILL_PERCENT}}%)"
    if ! fallocate -l "${{FILL_KB}}K" "$FILL_FILE"; then
      dd if=/dev/zero of="$FILL_FILE" bs=1K count="$FILL_KB" status=none || true
    fi
  else
    echo "${{MOUNT_POINT}} already at or above ${{FILL_PERCENT}}%"
  fi
  sleep "$FILL_SLEEP"
  rm -f "$FILL_FILE"
  echo "Released ${{FILL_FILE}}"
  sleep "$RELEASE_SLEEP"
done
"#
    )
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let p = &ctx.params;
    let mount = p.str("mount");
    let unit = simple_service(
        "Virtwork chaos-disk fill/release workload",
        "network.target local-fs.target",
        CHAOS_SCRIPT,
        10,
    );
    let config = CloudConfig {
        packages: Vec::new(),
        write_files: vec![
            WriteFile::new(SETUP_SCRIPT, disk_setup_script(SERIAL, mount), "0755"),
            WriteFile::new(
                CHAOS_SCRIPT,
                chaos_script(
                    mount,
                    p.str("fill-percent"),
                    p.str("fill-sleep"),
                    p.str("release-sleep"),
                ),
                "0755",
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
