//! `database`: PostgreSQL on a dedicated data disk with a pgbench loop.
//!
//! Fixes the reference's unreachable loop (SPEC §1 item 5): a root oneshot unit
//! (`virtwork-database-setup.service`, ordered before postgresql.service) mounts the disk and
//! runs initdb; only then is PostgreSQL started; the pgbench unit runs as `postgres`, creates
//! and initialises the `pgbench` database once (ExecStartPre) and loops.

use super::params::{ParamDef, ParamSchema};
use super::scripts::{Unit, bash_c, daemon_reload, disk_by_id, enable_now};
use super::{BuildContext, Workload, WorkloadOptions, WorkloadSettings, data_disk};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;

pub const NAME: &str = "database";
pub const UNIT: &str = "virtwork-database.service";
pub const SETUP_UNIT: &str = "virtwork-database-setup.service";
pub const DV_BASE: &str = "virtwork-database-data";
pub const SERIAL: &str = "virtwork-dbdisk";
pub const DATA_DIR: &str = "/var/lib/pgsql/data";
pub const SETUP_SCRIPT: &str = "/usr/local/bin/virtwork-db-setup.sh";
pub const PREPARE_SCRIPT: &str = "/usr/local/bin/virtwork-db-prepare.sh";

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::int("scale-factor", 50, 1, 100_000, "pgbench -i -s scale factor"),
            ParamDef::int("clients", 10, 1, 1000, "pgbench -c concurrent clients"),
            ParamDef::int("duration", 300, 1, 86_400, "pgbench -T seconds per run"),
        ],
    )
}

/// Root setup: wait for the disk, format if blank, mount on the data dir, persist it in
/// fstab by its stable path, initdb once.
pub fn setup_script() -> String {
    format!(
        r#"#!/bin/bash
# Prepares PostgreSQL storage (runs as root, before postgresql.service).
set -euo pipefail

DISK="{disk}"
DATA_DIR="{DATA_DIR}"

for _ in $(seq 1 30); do
  [ -e "$DISK" ] && break
  sleep 1
done
if [ ! -e "$DISK" ]; then
  echo "ERROR: disk ${{DISK}} not found after 30s" >&2
  exit 1
fi

REAL_DEV=$(readlink -f "$DISK")
mkdir -p "$DATA_DIR"
if ! mountpoint -q "$DATA_DIR"; then
  if ! blkid -o value -s TYPE "$REAL_DEV" >/dev/null 2>&1; then
    mkfs.xfs "$REAL_DEV"
  fi
  mount "$REAL_DEV" "$DATA_DIR"
fi
if ! awk -v m="$DATA_DIR" '$2 == m {{ found = 1 }} END {{ exit !found }}' /etc/fstab; then
  echo "${{DISK}} ${{DATA_DIR}} xfs defaults,nofail 0 0" >> /etc/fstab
fi
chown postgres:postgres "$DATA_DIR"
chmod 0700 "$DATA_DIR"
restorecon -R "$DATA_DIR" 2>/dev/null || true

if [ ! -f "${{DATA_DIR}}/PG_VERSION" ]; then
  postgresql-setup --initdb
fi
"#,
        disk = disk_by_id(SERIAL)
    )
}

/// Runs as postgres once the server is up: creates and fills the pgbench database once.
pub fn prepare_script(scale_factor: &str) -> String {
    format!(
        r#"#!/bin/bash
# Creates the pgbench database once (runs as postgres, after postgresql.service).
set -euo pipefail

MARKER="{DATA_DIR}/.virtwork-initialized"
if [ -f "$MARKER" ]; then
  echo "Database already initialized, skipping setup"
  exit 0
fi
dropdb --if-exists pgbench
createdb pgbench
pgbench -i -s {scale_factor} pgbench
touch "$MARKER"
"#
    )
}

/// The pgbench loop the service runs.
pub fn pgbench_loop(clients: &str, duration: &str) -> String {
    format!("while true; do pgbench -c {clients} -j 2 -T {duration} pgbench; sleep 10; done")
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let p = &ctx.params;
    let setup_unit = Unit::new("Virtwork database storage setup")
        .unit("After", "local-fs.target")
        .unit("Before", "postgresql.service")
        .service("Type", "oneshot")
        .service("RemainAfterExit", "yes")
        .service("ExecStart", SETUP_SCRIPT)
        .service("TimeoutStartSec", "600");
    let bench_unit = Unit::new("Virtwork database benchmark workload")
        .unit(
            "After",
            format!("network.target local-fs.target postgresql.service {SETUP_UNIT}"),
        )
        .unit("Requires", format!("postgresql.service {SETUP_UNIT}"))
        .service("Type", "simple")
        .service("User", "postgres")
        .service("ExecStartPre", PREPARE_SCRIPT)
        .service(
            "ExecStart",
            bash_c(&pgbench_loop(p.str("clients"), p.str("duration"))),
        )
        // pgbench -i of a large scale factor takes minutes.
        .service("TimeoutStartSec", "infinity")
        .service("Restart", "always")
        .service("RestartSec", "10");
    let config = CloudConfig {
        packages: vec!["postgresql-server".into(), "postgresql-contrib".into()],
        write_files: vec![
            WriteFile::new(SETUP_SCRIPT, setup_script(), "0755"),
            WriteFile::new(
                PREPARE_SCRIPT,
                prepare_script(p.str("scale-factor")),
                "0755",
            ),
            setup_unit.write_file(SETUP_UNIT),
            bench_unit.write_file(UNIT),
        ],
        runcmd: vec![
            daemon_reload(),
            // Storage and initdb first (a oneshot: `enable --now` waits for it) ...
            enable_now(SETUP_UNIT),
            // ... then the server on the initialised data dir, then the loop.
            enable_now("postgresql.service"),
            enable_now(UNIT),
        ],
        user: None,
    };
    let mut workload = ctx.single(config)?;
    workload.data_disks = vec![data_disk(DV_BASE, SERIAL, options)];
    Ok(Box::new(workload))
}
