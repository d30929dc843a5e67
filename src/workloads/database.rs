//! `database`: PostgreSQL on a dedicated data disk with a pgbench loop.
//!
//! The data disk (serial `virtwork-dbdisk`) is mounted by a systemd mount unit on the
//! family's PostgreSQL data location; PostgreSQL itself gets a drop-in requiring that mount
//! and the root setup unit, so the server can never start on the root disk. A root oneshot
//! (`virtwork-database-setup.service`) checks the mount and creates the cluster where the
//! family needs it; the pgbench unit runs as `postgres`, creates and initialises the `pgbench`
//! database once (ExecStartPre) and loops, failing when pgbench fails. Every family
//! difference lives in [`profile`]. Under a load profile the levels are pgbench's target
//! transactions per second (`--rate`).

use super::params::{ParamDef, ParamSchema};
use super::profile_driver::{self, LevelScale};
use super::scripts::{DataMount, Unit, argv, daemon_reload, enable_now, simple_service, strings};
use super::{
    BuildContext, GuestFamily, RolePayload, Workload, WorkloadOptions, WorkloadSettings, data_disk,
};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::Result;
use crate::profile_schedule::LoadProfile;

pub const NAME: &str = "database";
pub const UNIT: &str = "virtwork-database.service";
pub const SETUP_UNIT: &str = "virtwork-database-setup.service";
pub const DV_BASE: &str = "virtwork-database-data";
pub const SERIAL: &str = "virtwork-dbdisk";
pub const SETUP_SCRIPT: &str = "/usr/local/bin/virtwork-db-setup.sh";
pub const PREPARE_SCRIPT: &str = "/usr/local/bin/virtwork-db-prepare.sh";
pub const BENCH_SCRIPT: &str = "/usr/local/bin/virtwork-db-bench.sh";
/// Drop-in that ties the package's PostgreSQL unit to the data disk.
pub const SERVER_DROP_IN: &str = "virtwork-data-disk.conf";

/// What a load profile's level means for database.
pub const LEVELS: LevelScale = LevelScale {
    meaning: "transactions per second pgbench aims at (pgbench --rate)",
    max: 1_000_000,
    default_low: 50,
    default_high: 500,
};

pub fn schema() -> ParamSchema {
    let mut defs = vec![
        ParamDef::int("scale-factor", 50, 1, 100_000, "pgbench -i -s scale factor"),
        ParamDef::int("clients", 10, 1, 1000, "pgbench -c concurrent clients"),
        ParamDef::int("duration", 300, 1, 86_400, "pgbench -T seconds per run"),
    ];
    defs.extend(profile_driver::param_defs(LEVELS));
    ParamSchema::new(NAME, defs)
}

/// How the PostgreSQL cluster comes to exist on the data disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterInit {
    /// The package leaves the data directory empty: `postgresql-setup --initdb` creates the
    /// cluster on the mounted disk.
    SetupInitdb,
    /// The package creates and starts a cluster under the mount point at install time (in
    /// a version-named directory): it is stopped first, and the freshly formatted disk is
    /// seeded with it before being mounted there, so no version appears in the payload.
    CreatedByPackage,
}

/// What the database payload needs on each guest family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub packages: &'static [&'static str],
    /// Where the data disk is mounted.
    pub data_mount: &'static str,
    /// The unit that runs (or, on Debian, starts every cluster of) the server.
    pub server_unit: &'static str,
    pub init: ClusterInit,
}

/// The per-family table.
///
/// - fedora: `postgresql-server` (server, `postgresql-setup`), `postgresql-contrib` (pgbench);
///   data directory `/var/lib/pgsql/data`; `postgresql.service` runs the server.
/// - debian: `postgresql` (the supported major version; its server package ships pgbench,
///   and `/usr/bin/pgbench` dispatches to it); clusters live under `/var/lib/postgresql/<ver>`,
///   so the disk is mounted on `/var/lib/postgresql`; `postgresql.service` starts every
///   cluster (`postgresql@<ver>-main.service`, which itself requires the mount).
pub fn profile(family: GuestFamily) -> Profile {
    match family {
        GuestFamily::Fedora => Profile {
            packages: &["postgresql-server", "postgresql-contrib", "xfsprogs"],
            data_mount: "/var/lib/pgsql/data",
            server_unit: "postgresql.service",
            init: ClusterInit::SetupInitdb,
        },
        GuestFamily::Debian => Profile {
            packages: &["postgresql", "xfsprogs"],
            data_mount: "/var/lib/postgresql",
            server_unit: "postgresql.service",
            init: ClusterInit::CreatedByPackage,
        },
    }
}

/// The data disk of `profile`.
pub fn data_mount(profile: &Profile) -> DataMount {
    let mount = DataMount::new(SERIAL, profile.data_mount);
    match profile.init {
        ClusterInit::SetupInitdb => mount,
        ClusterInit::CreatedByPackage => mount.seeded(),
    }
}

/// Root setup, after the data disk is mounted and before PostgreSQL starts: refuse unless
/// the data location is the data disk, then make sure a cluster exists there.
pub fn setup_script(profile: &Profile) -> String {
    let disk = data_mount(profile);
    let cluster = match profile.init {
        ClusterInit::SetupInitdb => r#"chown postgres:postgres "$DATA_DIR"
chmod 0700 "$DATA_DIR"
restorecon -R "$DATA_DIR" 2>/dev/null || true
if [ ! -f "${DATA_DIR}/PG_VERSION" ]; then
  postgresql-setup --initdb
fi"#
        .to_string(),
        ClusterInit::CreatedByPackage => {
            r#"if ! compgen -G "${DATA_DIR}/*/main/PG_VERSION" >/dev/null; then
  echo "ERROR: no PostgreSQL cluster under ${DATA_DIR} on the data disk" >&2
  exit 1
fi"#
            .to_string()
        }
    };
    format!(
        r#"#!/bin/bash
# Checks PostgreSQL's storage is the data disk and a cluster exists there (runs as root,
# before {server}).
set -euo pipefail

DATA_DIR="{data}"
{require}
{cluster}
"#,
        server = profile.server_unit,
        data = profile.data_mount,
        require = disk.require_command(),
    )
}

/// Runs as postgres once the server is up: creates and fills the pgbench database once.
pub fn prepare_script(profile: &Profile, scale_factor: &str) -> String {
    format!(
        r#"#!/bin/bash
# Creates the pgbench database once (runs as postgres, after {server}).
set -euo pipefail

MARKER="{data}/.virtwork-initialized"
for _ in $(seq 1 120); do
  pg_isready -q && break
  sleep 1
done
pg_isready
if [ -f "$MARKER" ]; then
  echo "Database already initialized, skipping setup"
  exit 0
fi
dropdb --if-exists pgbench
createdb pgbench
pgbench -i -s {scale_factor} pgbench
touch "$MARKER"
"#,
        server = profile.server_unit,
        data = profile.data_mount,
    )
}

/// The pgbench loop the service runs; a failed pgbench run ends the unit.
pub fn bench_script(clients: &str, duration: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork database: pgbench TPC-B runs, forever.
set -euo pipefail

{loop}"#,
        loop = bench_loop(clients, duration, ""),
    )
}

/// The level script of a profiled unit: the pgbench loop at the transactions per second
/// given as `$1`.
pub fn level_script(clients: &str, duration: &str) -> String {
    format!(
        r#"#!/bin/bash
# virtwork database at one level of its load profile: $1 is pgbench's target transactions per second.
set -euo pipefail

{loop}"#,
        loop = bench_loop(clients, duration, " --rate \"$1\""),
    )
}

fn bench_loop(clients: &str, duration: &str, rate: &str) -> String {
    format!(
        r#"while true; do
  pgbench -c {clients} -j 2 -T {duration}{rate} pgbench
  sleep {pause}
done
"#,
        pause = crate::signals::contract::PGBENCH_PAUSE_SECS,
    )
}

/// The bench unit's ExecStart and its script files: the loop, or under a profile the driver.
fn bench_exec(
    load: Option<&LoadProfile>,
    clients: &str,
    duration: &str,
) -> (String, Vec<WriteFile>) {
    match load {
        None => (
            BENCH_SCRIPT.to_string(),
            vec![WriteFile::new(
                BENCH_SCRIPT,
                bench_script(clients, duration),
                "0755",
            )],
        ),
        Some(shape) => profile_driver::driven(NAME, shape, level_script(clients, duration)),
    }
}

/// The drop-in for the package's server unit.
pub fn server_drop_in(profile: &Profile) -> String {
    format!(
        "[Unit]\nRequiresMountsFor={}\nRequires={SETUP_UNIT}\nAfter={SETUP_UNIT}\n",
        profile.data_mount
    )
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let profile = profile(ctx.family);
    let p = &ctx.params;
    let disk = data_mount(&profile);
    let setup_unit = Unit::new("Virtwork database storage setup")
        .unit("RequiresMountsFor", profile.data_mount)
        .unit("Before", profile.server_unit)
        .service("Type", "oneshot")
        .service("RemainAfterExit", "yes")
        .service("ExecStart", SETUP_SCRIPT)
        .service("TimeoutStartSec", "600");
    let load = profile_driver::from_params(NAME, p, &settings.params, &[])?;
    let (bench, bench_files) = bench_exec(load.as_ref(), p.str("clients"), p.str("duration"));
    let mut bench_unit = simple_service("Virtwork database benchmark workload", &bench, 10)
        .unit("Requires", format!("{} {SETUP_UNIT}", profile.server_unit))
        .unit("After", format!("{} {SETUP_UNIT}", profile.server_unit))
        .unit("RequiresMountsFor", profile.data_mount)
        .service("User", "postgres")
        .service("ExecStartPre", disk.require_command())
        .service("ExecStartPre", PREPARE_SCRIPT)
        // pgbench -i of a large scale factor takes minutes.
        .service("TimeoutStartSec", "infinity");
    if load.is_some() {
        bench_unit = profile_driver::with_driver_settings(bench_unit);
    }
    let mut write_files = disk.files();
    write_files.extend([
        WriteFile::new(SETUP_SCRIPT, setup_script(&profile), "0755"),
        WriteFile::new(
            PREPARE_SCRIPT,
            prepare_script(&profile, p.str("scale-factor")),
            "0755",
        ),
    ]);
    write_files.extend(bench_files);
    write_files.extend([
        WriteFile::new(
            &format!(
                "{}/{}.d/{SERVER_DROP_IN}",
                super::scripts::UNIT_DIR,
                profile.server_unit
            ),
            server_drop_in(&profile),
            "0644",
        ),
        setup_unit.write_file(SETUP_UNIT),
        bench_unit.write_file(UNIT),
    ]);
    let mut runcmd = vec![daemon_reload()];
    if profile.init == ClusterInit::CreatedByPackage {
        // The package started its cluster on the root disk: stop it before the disk is
        // seeded with it and mounted over it.
        runcmd.push(argv(&["systemctl", "stop", profile.server_unit]));
    }
    runcmd.extend([
        argv(&["systemctl", "enable", profile.server_unit]),
        // Pulls in, in order: disk format, mount, setup, server, then the loop.
        enable_now(UNIT),
    ]);
    let config = CloudConfig {
        packages: strings(profile.packages),
        write_files,
        runcmd,
        ..Default::default()
    };
    let mut workload = ctx.single(RolePayload::new(config, &[SETUP_UNIT, UNIT]))?;
    workload.data_disks = vec![data_disk(DV_BASE, SERIAL, options)];
    Ok(Box::new(workload))
}
