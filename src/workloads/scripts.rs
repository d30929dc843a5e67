//! Building blocks shared by the guest payloads: systemd unit text, the data-disk setup
//! script and the usual `runcmd` lines.
//!
//! Values interpolated here come from constants or validated params only (see params.rs).

use crate::cloudinit::WriteFile;

/// Where unit files go in the guest.
pub const UNIT_DIR: &str = "/etc/systemd/system";

/// A systemd service unit, rendered in a fixed section/key order.
#[derive(Debug, Clone, Default)]
pub struct Unit {
    pub description: String,
    /// `[Unit]` lines after `Description=`, in order.
    pub unit: Vec<(&'static str, String)>,
    /// `[Service]` lines, in order.
    pub service: Vec<(&'static str, String)>,
}

impl Unit {
    /// A unit with `Description=`.
    pub fn new(description: &str) -> Self {
        Unit {
            description: description.to_string(),
            ..Default::default()
        }
    }

    /// Adds a `[Unit]` line.
    pub fn unit(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.unit.push((key, value.into()));
        self
    }

    /// Adds a `[Service]` line.
    pub fn service(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.service.push((key, value.into()));
        self
    }

    /// The unit file text; every unit is `WantedBy=multi-user.target`.
    pub fn render(&self) -> String {
        let mut out = format!("[Unit]\nDescription={}\n", self.description);
        for (k, v) in &self.unit {
            out.push_str(&format!("{k}={v}\n"));
        }
        out.push_str("\n[Service]\n");
        for (k, v) in &self.service {
            out.push_str(&format!("{k}={v}\n"));
        }
        out.push_str("\n[Install]\nWantedBy=multi-user.target\n");
        out
    }

    /// The unit as a `write_files` entry at `/etc/systemd/system/<file_name>`, mode 0644.
    pub fn write_file(&self, file_name: &str) -> WriteFile {
        WriteFile::new(&format!("{UNIT_DIR}/{file_name}"), self.render(), "0644")
    }
}

/// A `Type=simple`, `Restart=always` service running `exec_start` — the pattern of every
/// continuous workload.
pub fn simple_service(description: &str, after: &str, exec_start: &str, restart_sec: u32) -> Unit {
    Unit::new(description)
        .unit("After", after)
        .service("Type", "simple")
        .service("ExecStart", exec_start)
        .service("Restart", "always")
        .service("RestartSec", restart_sec.to_string())
}

/// A `/bin/bash -c '<body>'` ExecStart line; `body` must not contain `'`, `%` or `$`
/// unless they are meant for systemd/bash (the built-ins never use them).
pub fn bash_c(body: &str) -> String {
    format!("/bin/bash -c '{body}'")
}

/// An argv list from string slices.
pub fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// `systemctl daemon-reload`.
pub fn daemon_reload() -> Vec<String> {
    argv(&["systemctl", "daemon-reload"])
}

/// `systemctl enable --now <unit>`.
pub fn enable_now(unit: &str) -> Vec<String> {
    argv(&["systemctl", "enable", "--now", unit])
}

/// The stable guest path of a virtio disk with `serial`.
pub fn disk_by_id(serial: &str) -> String {
    format!("/dev/disk/by-id/virtio-{serial}")
}

/// A script that waits for the virtio disk `serial`, formats it as XFS if blank, mounts it
/// at `mount` and records it in /etc/fstab by its stable by-id path (idempotent).
/// `serial` and `mount` are constants or validated mount paths.
pub fn disk_setup_script(serial: &str, mount: &str) -> String {
    let disk = disk_by_id(serial);
    format!(
        r#"#!/bin/bash
# Prepares the virtwork data disk: wait, format if blank, mount, persist in fstab.
set -euo pipefail

DISK="{disk}"
MOUNT_POINT="{mount}"

for _ in $(seq 1 30); do
  [ -e "$DISK" ] && break
  sleep 1
done
if [ ! -e "$DISK" ]; then
  echo "ERROR: disk ${{DISK}} not found after 30s" >&2
  exit 1
fi

REAL_DEV=$(readlink -f "$DISK")
mkdir -p "$MOUNT_POINT"
if ! blkid -o value -s TYPE "$REAL_DEV" >/dev/null 2>&1; then
  mkfs.xfs "$REAL_DEV"
fi
if ! mountpoint -q "$MOUNT_POINT"; then
  mount "$REAL_DEV" "$MOUNT_POINT"
fi
if ! awk -v m="$MOUNT_POINT" '$2 == m {{ found = 1 }} END {{ exit !found }}' /etc/fstab; then
  echo "${{DISK}} ${{MOUNT_POINT}} xfs defaults,nofail 0 0" >> /etc/fstab
fi
"#
    )
}
