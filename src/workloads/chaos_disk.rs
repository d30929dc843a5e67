//! `chaos-disk`: repeatedly fills its own data disk to a percentage, holds, releases, waits.
//!
//! The disk (serial `virtwork-chdisk`) is mounted at `mount` by a systemd mount unit the
//! chaos unit requires; the fill loop re-checks before every fill that `mount` is that
//! disk's mount point and stops otherwise, so the root file system is never filled.

use super::params::{ParamDef, ParamSchema, StrRule};
use super::scripts::{DataMount, daemon_reload, enable_now, simple_service, strings};
use super::{
    BuildContext, GuestFamily, RolePayload, Workload, WorkloadOptions, WorkloadSettings, data_disk,
};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "chaos-disk";
pub const UNIT: &str = "virtwork-chaos-disk.service";
pub const DV_BASE: &str = "virtwork-chaos-disk-data";
pub const SERIAL: &str = "virtwork-chdisk";
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

/// The fill/release loop. Before every fill it checks that the mount point is the data
/// disk's mount ([`DataMount::require_command`]); if not, it exits non-zero and fills
/// nothing, so the root file system is never the target.
pub fn chaos_script(
    disk: &DataMount,
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

release() {{
  rm -f "$FILL_FILE"
}}
trap release EXIT

CYCLE=0
while true; do
  {require}
  CYCLE=$((CYCLE + 1))
  read -r TOTAL_KB USED_KB < <(df -k --output=size,used "$MOUNT_POINT" | awk 'NR == 2 {{ print $1, $2 }}')
  TARGET_KB=$((TOTAL_KB * FILL_PERCENT / 100))
  FILL_KB=$((TARGET_KB - USED_KB))
  if [ "$FILL_KB" -gt 0 ]; then
    echo "cycle ${{CYCLE}}: filling ${{MOUNT_POINT}} with ${{FILL_KB}}K (target ${{FILL_PERCENT}}%)"
    if ! fallocate -l "${{FILL_KB}}K" "$FILL_FILE"; then
      dd if=/dev/zero of="$FILL_FILE" bs=1K count="$FILL_KB" status=none || true
    fi
  else
    echo "cycle ${{CYCLE}}: ${{MOUNT_POINT}} already at or above ${{FILL_PERCENT}}%"
  fi
  echo "cycle ${{CYCLE}}: ${{MOUNT_POINT}} at $(df -k --output=pcent "$MOUNT_POINT" | awk 'NR == 2 {{ print $1 }}') used; holding ${{FILL_SLEEP}}s"
  sleep "$FILL_SLEEP"
  release
  echo "cycle ${{CYCLE}}: released ${{FILL_FILE}}; ${{MOUNT_POINT}} at $(df -k --output=pcent "$MOUNT_POINT" | awk 'NR == 2 {{ print $1 }}') used"
  sleep "$RELEASE_SLEEP"
done
"#,
        mount = disk.mount,
        require = disk.require_command(),
    )
}

/// What the chaos-disk payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub packages: &'static [&'static str],
}

/// The per-family table: `fallocate`, `df` and `findmnt` come with every base system
/// (util-linux, coreutils); `mkfs.xfs` does not.
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora | GuestFamily::Debian => Profile {
            packages: &["xfsprogs"],
        },
    }
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let disk = DataMount::new(SERIAL, p.str("mount"));
    let unit = simple_service(
        "Virtwork chaos-disk fill/release workload",
        CHAOS_SCRIPT,
        10,
    )
    .unit("RequiresMountsFor", disk.mount.clone())
    .service("ExecStartPre", disk.require_command());
    let mut write_files = disk.files();
    write_files.extend([
        WriteFile::new(
            CHAOS_SCRIPT,
            chaos_script(
                &disk,
                p.str("fill-percent"),
                p.str("fill-sleep"),
                p.str("release-sleep"),
            ),
            "0755",
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
