//! Real guests: every built-in workload and catalog entry, rendered by `virtwork run --dry-run`
//! for the debian family, boots in QEMU from a Debian bookworm image that holds none of the
//! workload packages, so cloud-init's own package installation runs (from a local repository;
//! the guests reach nothing else). Each scenario checks through the QEMU guest agent that
//! cloud-init finished without errors, that the readiness probe (run exactly as the VM spec
//! has it) is false before the workload unit starts and true after, and that the workload's
//! signal is really there in the guest.
//!
//! Needs qemu-system-x86, debootstrap, genisoimage, dpkg-dev, socat and root; without them
//! each test prints a notice and passes, unless `VIRTWORK_REQUIRE_GUEST_BOOT=1` (CI) makes that
//! a failure. Measured figures go to stderr and target/tmp/guest/figures.log.

#[path = "support/guest/mod.rs"]
mod guest;

use std::time::{Duration, Instant};

use guest::{Failure, Guest, VmSpec};

/// Boot-to-active budget of one guest under TCG (package installation included).
const READY_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Renders `args` and returns the VMs of `workload`.
fn vms(args: &[&str], workload: &str) -> Vec<VmSpec> {
    let plan = guest::render_plan(args).unwrap_or_else(|e| panic!("{e}"));
    let vms: Vec<VmSpec> = guest::vms_of(&plan)
        .into_iter()
        .filter(|vm| vm.workload == workload)
        .collect();
    assert!(!vms.is_empty(), "the plan for {args:?} has no {workload} VM");
    vms
}

/// Boots the one VM of a single-VM scenario, waits for it to be ready and runs `signal`.
fn single(
    spec: &VmSpec,
    signal: impl FnOnce(&mut Guest) -> Result<String, Failure>,
) -> Result<(), Failure> {
    let _slots = guest::take_slots(1);
    let mut vm = guest::boot(spec, None, &[])?;
    let ready = vm.wait_ready(READY_TIMEOUT)?;
    let measured = signal(&mut vm)?;
    guest::record(&format!(
        "{}: boot-to-active {ready:.0} s; {measured}",
        spec.workload
    ));
    Ok(())
}

fn run_single(test: &str, args: &[&str], workload: &str, signal: fn(&mut Guest) -> Result<String, Failure>) {
    if !guest::available(test) {
        return;
    }
    let specs = vms(args, workload);
    assert_eq!(specs.len(), 1, "{workload} plans one VM");
    if let Err(failure) = single(&specs[0], signal) {
        panic!("{failure}");
    }
}

/// `cpu` and `mem` figures of /proc/stat's first line: (busy, total) jiffies.
fn cpu_jiffies(line: &str) -> (u64, u64) {
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().unwrap())
        .collect();
    let total: u64 = fields.iter().sum();
    let idle = fields[3] + fields[4];
    (total - idle, total)
}

fn cpu_signal(vm: &mut Guest) -> Result<String, Failure> {
    let out = vm.check(
        "signal: cpu busy",
        "head -n1 /proc/stat; sleep 10; head -n1 /proc/stat",
    )?;
    let lines: Vec<&str> = out.lines().collect();
    let (busy0, total0) = cpu_jiffies(lines[0]);
    let (busy1, total1) = cpu_jiffies(lines[1]);
    let busy = (busy1 - busy0) as f64 / (total1 - total0) as f64 * 100.0;
    if busy < 80.0 {
        return Err(vm.fail(
            "signal: cpu busy",
            format!("guest CPU busy {busy:.1} % over 10 s, expected >= 80 %"),
        ));
    }
    vm.check("signal: cpu busy", "pgrep -x stress-ng")?;
    Ok(format!("guest CPU busy {busy:.1} % over 10 s"))
}

fn memory_signal(vm: &mut Guest) -> Result<String, Failure> {
    let total_kib: f64 = vm
        .check("signal: memory held", "awk '/^MemTotal:/ {print $2}' /proc/meminfo")?
        .trim()
        .parse()
        .unwrap();
    // The vm stressor maps and touches its buffer over and over; sample for up to 3 minutes.
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut best = 0.0f64;
    while Instant::now() < deadline {
        let out = vm.check(
            "signal: memory held",
            "ps -C stress-ng -o rss= | sort -n | tail -n1",
        )?;
        let rss: f64 = out.trim().parse().unwrap_or(0.0);
        best = best.max(rss / total_kib * 100.0);
        if best >= 70.0 {
            return Ok(format!(
                "stress-ng worker RSS {:.0} MiB = {best:.1} % of guest RAM ({:.0} MiB)",
                rss / 1024.0,
                total_kib / 1024.0
            ));
        }
        std::thread::sleep(Duration::from_secs(3));
    }
    Err(vm.fail(
        "signal: memory held",
        format!("the largest stress-ng worker held at most {best:.1} % of guest RAM, expected >= 70 %"),
    ))
}

/// The data disk's kernel name and its sectors written, from /proc/diskstats.
fn sectors_written(vm: &mut Guest, serial: &str) -> Result<(String, u64), Failure> {
    let out = vm.check(
        "signal: data disk writes",
        &format!(
            "dev=$(basename $(readlink -f /dev/disk/by-id/virtio-{serial})); awk -v d=$dev '$3 == d {{print d, $10}}' /proc/diskstats"
        ),
    )?;
    let mut words = out.split_whitespace();
    let dev = words.next().unwrap_or_default().to_string();
    let sectors = words.next().and_then(|w| w.parse().ok()).ok_or_else(|| {
        vm.fail("signal: data disk writes", format!("no diskstats line for the data disk: {out:?}"))
    })?;
    Ok((dev, sectors))
}

/// The data disk is what /mnt-style mount point `mount` holds, through its by-id path.
fn check_data_mount(vm: &mut Guest, mount: &str) -> Result<String, Failure> {
    let (serial, _) = vm.spec.data_disk.clone().expect("a data disk");
    let by_id = format!("/dev/disk/by-id/virtio-{serial}");
    let unit = vm.check(
        "data disk mount",
        &format!("systemctl show -p What --value \"$(systemd-escape -p --suffix=mount {mount})\""),
    )?;
    if unit.trim() != by_id {
        return Err(vm.fail(
            "data disk mount",
            format!("the mount unit of {mount} mounts {:?}, expected {by_id}", unit.trim()),
        ));
    }
    vm.check(
        "data disk mount",
        &format!(
            "test \"$(readlink -f $(findmnt -n -o SOURCE --mountpoint {mount}))\" = \"$(readlink -f {by_id})\""
        ),
    )?;
    Ok(serial)
}

fn disk_signal(vm: &mut Guest) -> Result<String, Failure> {
    let serial = check_data_mount(vm, "/mnt/data")?;
    let fio = vm.check("signal: fio running", "pgrep -x fio | wc -l")?;
    let cwd = vm.check(
        "signal: fio running",
        "for p in $(pgrep -x fio); do readlink /proc/$p/cwd; ls -l /proc/$p/fd 2>/dev/null | grep -o '/mnt/data/[^ ]*'; done | sort -u",
    )?;
    if !cwd.contains("/mnt/data/") {
        return Err(vm.fail(
            "signal: fio running",
            format!("no fio process has a file under /mnt/data open: {cwd}"),
        ));
    }
    let (dev, before) = sectors_written(vm, &serial)?;
    std::thread::sleep(Duration::from_secs(10));
    let (_, after) = sectors_written(vm, &serial)?;
    let mib = (after - before) as f64 * 512.0 / 1048576.0;
    if after <= before {
        return Err(vm.fail(
            "signal: data disk writes",
            format!("no sectors written to {dev} in 10 s"),
        ));
    }
    Ok(format!(
        "{} fio processes on /mnt/data ({dev}, by-id virtio-{serial}); {mib:.1} MiB written in 10 s ({:.2} MiB/s)",
        fio.trim(),
        mib / 10.0
    ))
}

fn database_signal(vm: &mut Guest) -> Result<String, Failure> {
    let query = "runuser -u postgres -- psql -tAc \"select xact_commit from pg_stat_database where datname = 'pgbench'\"";
    let data_dir = vm.check(
        "signal: pgbench transactions",
        "runuser -u postgres -- psql -tAc 'show data_directory'",
    )?;
    let data_mount = vm.check(
        "data disk mount",
        &format!("findmnt -n -o TARGET -T {}", data_dir.trim()),
    )?;
    check_data_mount(vm, data_mount.trim())?;
    // pgbench -i runs before the first transactions; wait for them.
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut running = false;
    while Instant::now() < deadline {
        let out = vm.sh("pgrep -x pgbench >/dev/null && ! pgrep -f 'pgbench -i' >/dev/null", Duration::from_secs(20));
        if out.is_ok_and(|r| r.code == 0) {
            running = true;
            break;
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    if !running {
        return Err(vm.fail("signal: pgbench transactions", "pgbench never got past initialisation in 10 minutes"));
    }
    let before: u64 = vm.check("signal: pgbench transactions", query)?.trim().parse().unwrap_or(0);
    std::thread::sleep(Duration::from_secs(10));
    let after: u64 = vm.check("signal: pgbench transactions", query)?.trim().parse().unwrap_or(0);
    if after <= before {
        return Err(vm.fail(
            "signal: pgbench transactions",
            format!("pg_stat_database.xact_commit of pgbench stayed at {before} over 10 s"),
        ));
    }
    Ok(format!(
        "PostgreSQL counted {} pgbench transactions in 10 s ({:.1}/s); data directory {} on the data disk",
        after - before,
        (after - before) as f64 / 10.0,
        data_dir.trim()
    ))
}

#[test]
fn cpu_keeps_the_guest_cpus_busy() {
    run_single("cpu_keeps_the_guest_cpus_busy", &["--workloads", "cpu"], "cpu", cpu_signal);
}

#[test]
fn memory_holds_most_of_the_guest_ram() {
    run_single(
        "memory_holds_most_of_the_guest_ram",
        &["--workloads", "memory"],
        "memory",
        memory_signal,
    );
}

#[test]
fn disk_runs_fio_on_the_data_disk() {
    run_single("disk_runs_fio_on_the_data_disk", &["--workloads", "disk"], "disk", disk_signal);
}

#[test]
fn database_runs_pgbench_on_the_data_disk() {
    // A small scale factor: pgbench -i of the default 50 takes many minutes under TCG.
    run_single(
        "database_runs_pgbench_on_the_data_disk",
        &["--workloads", "database", "--params", "database.scale-factor=2"],
        "database",
        database_signal,
    );
}

/// The harness itself: a payload whose package does not exist fails, naming the workload and
/// the step.
#[test]
fn a_broken_payload_fails_naming_the_workload_and_the_step() {
    if !guest::available("a_broken_payload_fails_naming_the_workload_and_the_step") {
        return;
    }
    let mut spec = vms(&["--workloads", "cpu"], "cpu").remove(0);
    assert!(spec.user_data.contains("\n- stress-ng\n"), "{}", spec.user_data);
    spec.user_data = spec
        .user_data
        .replace("\n- stress-ng\n", "\n- stress-ng-no-such-package\n");
    let failure = single(&spec, |_| Ok(String::new())).expect_err("a payload that cannot install its package must fail");
    let message = failure.to_string();
    eprintln!("{message}");
    assert!(message.starts_with("workload cpu (virtwork-cpu-0): step `cloud-init modules` failed"), "{message}");
    assert!(message.contains("stress-ng-no-such-package"), "{message}");
}
