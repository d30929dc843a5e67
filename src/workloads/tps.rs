//! `tps`: transactions-per-second pairs. Servers run netserver plus a python HTTP server
//! serving a random test file; clients run netperf TCP_RR rounds and timed HTTP downloads
//! through the `virtwork-tps-server` Service (component `tps` AND role `server`).

use super::params::{FileSize, ParamDef, ParamSchema, StrRule, parse_file_size};
use super::scripts::{daemon_reload, enable_now, simple_service};
use super::{BuildContext, ROLE_SERVER, Workload, WorkloadOptions, WorkloadSettings, role_service};
use crate::cloudinit::{CloudConfig, WriteFile};
use crate::error::{Error, Result};

pub const NAME: &str = "tps";
pub const UNIT: &str = "virtwork-tps.service";
pub const SERVICE_NAME: &str = "virtwork-tps-server";
pub const SERVER_SCRIPT: &str = "/usr/local/bin/virtwork-tps-server.sh";
pub const CLIENT_SCRIPT: &str = "/usr/local/bin/virtwork-tps-client.sh";
pub const NETPERF_CONTROL_PORT: u16 = 12865;
pub const NETPERF_DATA_PORT: u16 = 12866;
pub const HTTP_PORT: u16 = 8080;

pub fn schema() -> ParamSchema {
    ParamSchema::new(
        NAME,
        vec![
            ParamDef::string(
                "file-size",
                "10M",
                StrRule::FileSize,
                "size of the HTTP test file, <n>K|M|G",
            ),
            ParamDef::int(
                "iterations",
                30,
                1,
                100_000,
                "netperf rounds and HTTP windows per cycle",
            ),
            ParamDef::int(
                "duration",
                60,
                1,
                86_400,
                "seconds per netperf round and HTTP window",
            ),
        ],
    )
}

/// The `dd` arguments that write exactly `size` bytes: `bs=1K` for K sizes, `bs=1M`
/// otherwise (G sizes as 1024 MiB blocks), so the client's byte count always matches.
pub fn dd_block_args(size: FileSize) -> String {
    match size.unit {
        'K' => format!("bs=1K count={}", size.count),
        'M' => format!("bs=1M count={}", size.count),
        _ => format!("bs=1M count={}", size.count * 1024),
    }
}

/// The server script: netserver, the test file, the HTTP server.
pub fn server_script(size: FileSize) -> String {
    format!(
        r#"#!/usr/bin/env bash
# virtwork tps server: netperf endpoint plus an HTTP server for file transfers.
set -e

echo "=== Virtwork TPS Server ==="
netserver -D -p {NETPERF_CONTROL_PORT} &
NETSERVER_PID=$!

mkdir -p /srv/virtwork
dd if=/dev/urandom of=/srv/virtwork/testfile {dd} iflag=fullblock 2>&1

python3 -m http.server {HTTP_PORT} --directory /srv/virtwork &
HTTP_PID=$!

echo "=== Virtwork TPS Server ready ==="
echo "netserver pid: ${{NETSERVER_PID}} (port {NETPERF_CONTROL_PORT})"
echo "http.server pid: ${{HTTP_PID}} (port {HTTP_PORT})"
echo "testfile: /srv/virtwork/testfile ({size})"
wait
"#,
        dd = dd_block_args(size),
    )
}

/// The client script: ITERATIONS netperf TCP_RR rounds, then ITERATIONS timed HTTP windows.
pub fn client_script(namespace: &str, iterations: &str, duration: &str, size: FileSize) -> String {
    format!(
        r#"#!/usr/bin/env bash
# virtwork tps client: netperf TCP_RR transactions, then timed HTTP file transfers.
SERVER="{SERVICE_NAME}.{namespace}.svc.cluster.local"
ITERATIONS={iterations}
MSG_SIZE=64
DURATION={duration}
FILE_SIZE_BYTES={bytes}

echo "Waiting for ${{SERVER}}:{HTTP_PORT} ..."
until curl -s -o /dev/null -w '' "http://${{SERVER}}:{HTTP_PORT}/"; do
  sleep 2
done

echo "=== Phase 1: netperf TCP_RR (${{ITERATIONS}} x ${{DURATION}}s) ==="
for i in $(seq 1 "$ITERATIONS"); do
  echo "--- TCP_RR round ${{i}}/${{ITERATIONS}} ---"
  netperf -H "$SERVER" -p {NETPERF_CONTROL_PORT} -t TCP_RR -l "$DURATION" -- -r "$MSG_SIZE,$MSG_SIZE" -P ,{NETPERF_DATA_PORT}
  sleep 2
done

echo "=== Phase 2: HTTP file transfers (${{ITERATIONS}} x ${{DURATION}}s) ==="
for i in $(seq 1 "$ITERATIONS"); do
  echo "--- HTTP round ${{i}}/${{ITERATIONS}} ---"
  COUNT=0
  START=$(date +%s)
  END=$((START + DURATION))
  while [ "$(date +%s)" -lt "$END" ]; do
    if curl -s -o /dev/null -w '' "http://${{SERVER}}:{HTTP_PORT}/testfile"; then
      COUNT=$((COUNT + 1))
    fi
  done
  ELAPSED=$(( $(date +%s) - START ))
  [ "$ELAPSED" -gt 0 ] || ELAPSED=1
  BYTES=$((COUNT * FILE_SIZE_BYTES))
  echo "Completed:  ${{COUNT}} transfers in ${{ELAPSED}}s"
  echo "Throughput: $((COUNT / ELAPSED)) transfers/sec, $((BYTES / ELAPSED / 1048576)) MB/s"
  sleep 2
done

echo "TPS testing complete"
"#,
        bytes = size.bytes(),
    )
}

pub fn build(settings: &WorkloadSettings, options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let ctx = BuildContext::new(NAME, &schema(), settings, options)?;
    let p = &ctx.params;
    let raw = p.str("file-size");
    let size = parse_file_size(raw).map_err(|detail| {
        Error::input(format!(
            "tps: invalid file-size format: must be a positive integer followed by K, M, or G (e.g. '10M'): {raw:?}{detail}"
        ))
    })?;
    let server_unit = simple_service(
        "Virtwork TPS server (netperf + HTTP)",
        "network.target",
        SERVER_SCRIPT,
        10,
    );
    let client_unit = simple_service(
        "Virtwork TPS client (netperf TCP_RR + HTTP file transfer)",
        "network.target",
        CLIENT_SCRIPT,
        30,
    );
    let server = CloudConfig {
        packages: vec!["netperf".into(), "python3".into()],
        write_files: vec![
            WriteFile::new(SERVER_SCRIPT, server_script(size), "0755"),
            server_unit.write_file(UNIT),
        ],
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        user: None,
    };
    let client = CloudConfig {
        packages: vec!["netperf".into(), "curl".into()],
        write_files: vec![
            WriteFile::new(
                CLIENT_SCRIPT,
                client_script(
                    &options.namespace,
                    p.str("iterations"),
                    p.str("duration"),
                    size,
                ),
                "0755",
            ),
            client_unit.write_file(UNIT),
        ],
        runcmd: vec![daemon_reload(), enable_now(UNIT)],
        user: None,
    };
    let service = role_service(
        SERVICE_NAME,
        NAME,
        ROLE_SERVER,
        &[
            ("netperf-ctrl", NETPERF_CONTROL_PORT),
            ("netperf-data", NETPERF_DATA_PORT),
            ("http-data", HTTP_PORT),
        ],
    );
    Ok(Box::new(ctx.server_client(server, client, service)?))
}
