//! Building blocks shared by the guest payloads: systemd unit text, the data-disk setup
//! script and the usual `runcmd` lines.
//!
//! Values interpolated here come from constants or validated params only (see params.rs).

use crate::cloudinit::WriteFile;

/// Where unit files go in the guest.
pub const UNIT_DIR: &str = "/etc/systemd/system";

/// A systemd unit (service or mount), rendered in a fixed section/key order.
#[derive(Debug, Clone)]
pub struct Unit {
    pub description: String,
    /// `[Unit]` lines after `Description=`, in order.
    pub unit: Vec<(&'static str, String)>,
    /// The type section: `Service` or `Mount`.
    pub section: &'static str,
    /// Lines of the type section, in order.
    pub service: Vec<(&'static str, String)>,
    /// `WantedBy=` target of `[Install]`; `None` for units only pulled in as dependencies.
    pub wanted_by: Option<&'static str>,
}

impl Default for Unit {
    fn default() -> Self {
        Unit {
            description: String::new(),
            unit: Vec::new(),
            section: "Service",
            service: Vec::new(),
            wanted_by: Some("multi-user.target"),
        }
    }
}

impl Unit {
    /// A service unit with `Description=`, enabled by `multi-user.target`.
    pub fn new(description: &str) -> Self {
        Unit {
            description: description.to_string(),
            ..Default::default()
        }
    }

    /// A `.mount` unit without `[Install]`: it is started only as a dependency of the units
    /// that name its path in `RequiresMountsFor=`.
    pub fn mount(description: &str) -> Self {
        Unit {
            description: description.to_string(),
            section: "Mount",
            wanted_by: None,
            ..Default::default()
        }
    }

    /// Adds a `[Unit]` line.
    pub fn unit(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.unit.push((key, value.into()));
        self
    }

    /// Adds a line to the type section (`[Service]` or `[Mount]`).
    pub fn service(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.service.push((key, value.into()));
        self
    }

    /// Drops the `[Install]` section (a unit started only as a dependency).
    pub fn no_install(mut self) -> Self {
        self.wanted_by = None;
        self
    }

    /// The unit file text.
    pub fn render(&self) -> String {
        let mut out = format!("[Unit]\nDescription={}\n", self.description);
        for (k, v) in &self.unit {
            out.push_str(&format!("{k}={v}\n"));
        }
        out.push_str(&format!("\n[{}]\n", self.section));
        for (k, v) in &self.service {
            out.push_str(&format!("{k}={v}\n"));
        }
        if let Some(target) = self.wanted_by {
            out.push_str(&format!("\n[Install]\nWantedBy={target}\n"));
        }
        out
    }

    /// The unit as a `write_files` entry at `/etc/systemd/system/<file_name>`, mode 0644.
    pub fn write_file(&self, file_name: &str) -> WriteFile {
        WriteFile::new(&format!("{UNIT_DIR}/{file_name}"), self.render(), "0644")
    }
}

/// A `Type=simple`, `Restart=always` service running `exec_start` — the pattern of every
/// continuous workload. Add ordering/requirement lines with [`Unit::unit`].
pub fn simple_service(description: &str, exec_start: &str, restart_sec: u32) -> Unit {
    Unit::new(description)
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

/// Owned strings from string slices (package lists).
pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Lines a unit needs to run only once the network is configured: `network-online.target`
/// is pulled in (`Wants=`) and waited for (`After=`).
pub fn after_network_online(unit: Unit) -> Unit {
    unit.unit("Wants", "network-online.target")
        .unit("After", "network-online.target")
}

/// An argv list from string slices.
pub fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// `systemctl daemon-reload`.
pub fn daemon_reload() -> Vec<String> {
    argv(&["systemctl", "daemon-reload"])
}

/// `systemctl enable --now --no-block <unit>`: enabled for every boot and started without
/// making cloud-init wait for it (a client may wait for its server indefinitely, a database
/// initialises for minutes); systemd still orders every start by the units' dependencies.
pub fn enable_now(unit: &str) -> Vec<String> {
    argv(&["systemctl", "enable", "--now", "--no-block", unit])
}

/// The stable guest path of a virtio disk with `serial`.
pub fn disk_by_id(serial: &str) -> String {
    format!("/dev/disk/by-id/virtio-{serial}")
}

/// Waits until a TCP port accepts connections: the `ExecStartPre=` of clients, so a client
/// unit stays `activating` (not active, not ready) until its server answers.
pub const WAIT_TCP: &str = "/usr/local/bin/virtwork-wait-tcp";

/// The text of [`WAIT_TCP`].
pub fn wait_tcp_script() -> String {
    r#"#!/bin/bash
# Usage: virtwork-wait-tcp HOST PORT
# Returns once HOST:PORT accepts a TCP connection; retries every 2 s, logging every minute.
set -uo pipefail

HOST="$1"
PORT="$2"
TRIES=0
# The inner shell gets host and port as $0 and $1: single quotes are meant.
# shellcheck disable=SC2016
until timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$HOST" "$PORT" 2>/dev/null; do
  TRIES=$((TRIES + 1))
  if [ $((TRIES % 30)) -eq 1 ]; then
    echo "Waiting for ${HOST}:${PORT} to accept connections"
  fi
  sleep 2
done
echo "${HOST}:${PORT} accepts connections"
"#
    .to_string()
}

/// The guest port of the readiness endpoint KubeVirt's `httpGet` readiness probe asks. The
/// probe is copied onto the virt-launcher pod and run by the kubelet against the pod's
/// address; masquerade binding forwards every port but libvirt's migration ports to the
/// guest, so this one reaches it.
pub const READY_PORT: u16 = 8787;
/// The path the probe asks for (the responder answers every path alike).
pub const READY_PATH: &str = "/ready";
/// The responder's program: one instance per connection, started by [`READY_SOCKET`].
pub const READY_RESPONDER: &str = "/usr/local/bin/virtwork-ready";
/// The socket unit listening on [`READY_PORT`].
pub const READY_SOCKET: &str = "virtwork-ready.socket";
/// The service template each accepted connection runs as.
const READY_SERVICE: &str = "virtwork-ready@.service";
/// Seconds one answer may take before systemd ends it, so a client that never sends its
/// request cannot pile instances up.
const READY_ANSWER_SECS: u32 = 10;
/// Connections answered at once.
const READY_MAX_CONNECTIONS: u32 = 16;

/// Checks that `unit` is a plain systemd unit name the readiness endpoint can name in its
/// script: letters, digits and `:_.@-`, not starting with `-`.
pub fn check_ready_unit(workload: &str, unit: &str) -> crate::error::Result<()> {
    let safe = !unit.is_empty()
        && unit.len() <= 256
        && !unit.starts_with('-')
        && unit
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'.' | b'@' | b'-'));
    if safe {
        Ok(())
    } else {
        Err(crate::error::Error::input(format!(
            "unit name {unit:?} of workload {workload:?} cannot be checked by the readiness probe: \
             use letters, digits, ':', '_', '.', '@' and '-' (rename the catalog service file)"
        )))
    }
}

/// The text of [`READY_RESPONDER`] for `units` (checked by [`check_ready_unit`]): reads the
/// request's head (bounded), then answers `200` when every unit is active and `503` naming
/// the inactive ones otherwise. It runs as a system service, not through the guest agent, so
/// SELinux confines it no more than any service: systemd grants it the unit status it asks
/// for, which it refuses to commands the agent runs (`virt_qemu_ga_t`).
pub fn ready_responder_script(units: &[String]) -> String {
    r#"#!/bin/sh
# Answers one HTTP request on stdin/stdout (systemd socket activation, Accept=yes): 200 while
# every workload unit is active, 503 naming the inactive ones otherwise.
CR=$(printf '\r')
LINES=0
while [ "$LINES" -lt 64 ] && IFS= read -r line; do
  LINES=$((LINES + 1))
  case "$line" in
    "" | "$CR") break ;;
  esac
done
DOWN=""
for unit in @UNITS@; do
  systemctl is-active --quiet "$unit" || DOWN="$DOWN $unit"
done
if [ -z "$DOWN" ]; then
  STATUS="200 OK"
  BODY="active: @UNITS@"
else
  STATUS="503 Service Unavailable"
  BODY="inactive:$DOWN"
fi
printf 'HTTP/1.0 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n' \
  "$STATUS" "$((${#BODY} + 1))" "$BODY"
"#
    .replace("@UNITS@", &units.join(" "))
}

/// The readiness endpoint's files: the responder, its socket unit on [`READY_PORT`] and the
/// per-connection service template; enable the socket with [`enable_now`]`(`[`READY_SOCKET`]`)`.
pub fn ready_endpoint_files(units: &[String]) -> Vec<WriteFile> {
    let socket = Unit {
        section: "Socket",
        wanted_by: Some("sockets.target"),
        ..Unit::new("virtwork workload readiness endpoint (KubeVirt httpGet readiness probe)")
    }
    .service("ListenStream", READY_PORT.to_string())
    .service("Accept", "yes")
    .service("MaxConnections", READY_MAX_CONNECTIONS.to_string());
    let service = Unit::new("virtwork workload readiness answer")
        .service("ExecStart", READY_RESPONDER)
        .service("StandardInput", "socket")
        .service("StandardOutput", "socket")
        .service("StandardError", "journal")
        .service("RuntimeMaxSec", READY_ANSWER_SECS.to_string())
        .service("NoNewPrivileges", "yes")
        .service("PrivateTmp", "yes")
        .service("ProtectHome", "yes")
        .no_install();
    vec![
        WriteFile::new(READY_RESPONDER, ready_responder_script(units), "0755"),
        socket.write_file(READY_SOCKET),
        service.write_file(READY_SERVICE),
    ]
}

/// The guard every data-disk workload runs before it writes: exits non-zero (and says why on
/// stderr) unless `MOUNT_POINT` is a mount point of `DEVICE`. This is what keeps a workload
/// from ever writing into the directory of the root file system under an absent mount.
pub const REQUIRE_MOUNT: &str = "/usr/local/bin/virtwork-require-mount";
/// Formats a blank data disk (and, with `--seed`, copies what the root file system has
/// under the mount point onto it), before its mount unit mounts it.
pub const FORMAT_DATA_DISK: &str = "/usr/local/bin/virtwork-format-data-disk";
/// File system virtwork creates on blank data disks.
pub const DATA_FS: &str = "xfs";
/// Seconds the format step waits for the data disk to appear.
pub const DISK_WAIT_SECS: u32 = 30;

/// The text of [`REQUIRE_MOUNT`].
pub fn require_mount_script() -> String {
    r#"#!/bin/bash
# Usage: virtwork-require-mount MOUNT_POINT DEVICE
# Succeeds only when MOUNT_POINT is a mount point of DEVICE (symlinks resolved), so a
# workload never writes to the root file system when its data disk is missing.
set -euo pipefail

MOUNT_POINT="$1"
DEVICE="$2"

if [ ! -e "$DEVICE" ]; then
  echo "ERROR: data disk ${DEVICE} is missing; refusing to use ${MOUNT_POINT}" >&2
  exit 1
fi
EXPECTED=$(readlink -f "$DEVICE")
if ! SOURCE=$(findmnt -n -o SOURCE --mountpoint "$MOUNT_POINT" | tail -n 1) || [ -z "$SOURCE" ]; then
  echo "ERROR: ${MOUNT_POINT} is not a mount point; refusing to write to the root file system" >&2
  exit 1
fi
ACTUAL=$(readlink -f "$SOURCE")
if [ "$ACTUAL" != "$EXPECTED" ]; then
  echo "ERROR: ${MOUNT_POINT} is mounted from ${SOURCE}, not from the data disk ${DEVICE} (${EXPECTED}); refusing to write" >&2
  exit 1
fi
"#
    .to_string()
}

/// The text of [`FORMAT_DATA_DISK`].
pub fn format_data_disk_script() -> String {
    format!(
        r#"#!/bin/bash
# Usage: virtwork-format-data-disk DEVICE MOUNT_POINT [--seed]
# Waits for DEVICE, creates an {DATA_FS} file system on it when it has none (a disk that
# already carries any file system is never reformatted) and, with --seed, copies what the
# root file system holds under MOUNT_POINT onto the new file system first (for packages that
# created their data there before the disk was mounted). The guest sees a raw disk whatever
# the volume mode; a Block volume comes as the provisioner left it (CDI writes nothing on a
# blank one), so a foreign signature on it is named and left alone rather than destroyed.
set -euo pipefail

DEVICE="$1"
MOUNT_POINT="$2"
SEED="${{3:-}}"

for _ in $(seq 1 {DISK_WAIT_SECS}); do
  [ -e "$DEVICE" ] && break
  sleep 1
done
if [ ! -e "$DEVICE" ]; then
  echo "ERROR: data disk ${{DEVICE}} not found after {DISK_WAIT_SECS}s; the workload will not start" >&2
  exit 1
fi

REAL_DEV=$(readlink -f "$DEVICE")
if FOUND=$(blkid -o value -s TYPE "$REAL_DEV" 2>/dev/null); then
  if [ "$FOUND" = "{DATA_FS}" ]; then
    echo "${{DEVICE}} (${{REAL_DEV}}) already has a file system; not formatting"
    exit 0
  fi
  echo "ERROR: data disk ${{DEVICE}} (${{REAL_DEV}}) already carries ${{FOUND}}, not {DATA_FS}; it is not reformatted (a Block volume comes as its provisioner left it), so the workload will not start: wipe it (wipefs -a ${{REAL_DEV}}) or use a fresh volume" >&2
  exit 1
fi
echo "Formatting ${{DEVICE}} (${{REAL_DEV}}) as {DATA_FS}"
mkfs.{DATA_FS} -q "$REAL_DEV"
if [ "$SEED" = "--seed" ] && [ -d "$MOUNT_POINT" ]; then
  STAGING=$(mktemp -d /run/virtwork-seed.XXXXXX)
  mount "$REAL_DEV" "$STAGING"
  cp -a "${{MOUNT_POINT}}/." "${{STAGING}}/"
  chown --reference="$MOUNT_POINT" "$STAGING"
  chmod --reference="$MOUNT_POINT" "$STAGING"
  umount "$STAGING"
  rmdir "$STAGING"
  echo "Seeded ${{DEVICE}} with the contents of ${{MOUNT_POINT}}"
fi
"#
    )
}

/// `path` escaped as systemd names units for it (`systemd-escape --path`): `/mnt/my-data`
/// becomes `mnt-my\x2ddata`. Callers pass validated absolute paths (no `//`, `.` or `..`).
pub fn systemd_escape_path(path: &str) -> String {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return "-".to_string();
    }
    let mut out = String::with_capacity(trimmed.len());
    for (i, b) in trimmed.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'.') => {
                out.push(b as char)
            }
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// A blank data disk mounted through a systemd mount unit.
///
/// Units that use the disk say `RequiresMountsFor=<mount>`: systemd then starts the mount
/// unit (which requires the format unit) before them, and fails them — visibly, in
/// `systemctl` and the journal — when the disk is missing or cannot be mounted. No fstab
/// entry is written: the mount unit is the only way the disk gets mounted, so a missing disk
/// can never leave the workload writing into the bare directory on the root file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataMount {
    /// virtio serial of the disk.
    pub serial: String,
    /// Absolute mount point (a constant or a validated mount path).
    pub mount: String,
    /// Copy the root file system's content under `mount` onto the freshly formatted disk.
    pub seed: bool,
}

impl DataMount {
    /// A data disk `serial` mounted at `mount`.
    pub fn new(serial: &str, mount: &str) -> Self {
        DataMount {
            serial: serial.to_string(),
            mount: mount.to_string(),
            seed: false,
        }
    }

    /// Seeds the new file system with what the root file system has under the mount point.
    pub fn seeded(mut self) -> Self {
        self.seed = true;
        self
    }

    /// The stable device path, `/dev/disk/by-id/virtio-<serial>`.
    pub fn device(&self) -> String {
        disk_by_id(&self.serial)
    }

    /// The mount unit's file name (systemd derives it from the mount point).
    pub fn mount_unit(&self) -> String {
        format!("{}.mount", systemd_escape_path(&self.mount))
    }

    /// The oneshot unit that formats the disk before it is mounted.
    pub fn format_unit(&self) -> String {
        format!("virtwork-format-{}.service", self.serial)
    }

    /// The guard command line for an `ExecStartPre=` or a script.
    pub fn require_command(&self) -> String {
        format!("{REQUIRE_MOUNT} {} {}", self.mount, self.device())
    }

    /// The format unit, the mount unit and the two helper scripts, as `write_files`.
    pub fn files(&self) -> Vec<WriteFile> {
        let device = self.device();
        let seed = if self.seed { " --seed" } else { "" };
        let format = Unit::new(&format!(
            "Virtwork data disk {}: create a file system if blank",
            self.serial
        ))
        .unit("Before", self.mount_unit())
        .service("Type", "oneshot")
        .service("RemainAfterExit", "yes")
        .service(
            "ExecStart",
            format!("{FORMAT_DATA_DISK} {device} {}{seed}", self.mount),
        )
        .service("TimeoutStartSec", "600")
        .no_install();
        let mount = Unit::mount(&format!(
            "Virtwork data disk {} at {}",
            self.serial, self.mount
        ))
        .unit("Requires", self.format_unit())
        .unit("After", self.format_unit())
        .service("What", device)
        .service("Where", self.mount.clone())
        .service("Type", DATA_FS)
        // nofail: the disk is the workload's business; a missing one must fail the workload
        // units that require it, never the boot (local-fs.target).
        .service("Options", "defaults,nofail")
        .service("TimeoutSec", "120");
        vec![
            WriteFile::new(REQUIRE_MOUNT, require_mount_script(), "0755"),
            WriteFile::new(FORMAT_DATA_DISK, format_data_disk_script(), "0755"),
            format.write_file(&self.format_unit()),
            mount.write_file(&self.mount_unit()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_escape_like_systemd_escape() {
        // Expected values are `systemd-escape --path` output.
        for (path, unit) in [
            ("/mnt/data", "mnt-data"),
            ("/var/lib/my-chaos.d", "var-lib-my\\x2dchaos.d"),
            ("/mnt/.hidden", "mnt-.hidden"),
            ("/srv/a_b/c:d", "srv-a_b-c:d"),
            ("/opt/x+y", "opt-x\\x2by"),
            ("/mnt/data/", "mnt-data"),
        ] {
            assert_eq!(systemd_escape_path(path), unit, "{path}");
        }
        assert_eq!(
            DataMount::new("s", "/var/lib/pgsql/data").mount_unit(),
            "var-lib-pgsql-data.mount"
        );
    }
}
