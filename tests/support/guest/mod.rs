//! The real-guest harness: boots the payloads `virtwork run --dry-run` renders for the debian
//! family in QEMU and inspects them through the QEMU guest agent.
//!
//! It owns the cached Debian bookworm image (built by `build-image.sh`, keyed by a hash of
//! that recipe), the local apt repository the guests install their packages from (downloaded
//! with the host's apt, indexed with dpkg-scanpackages, served on 127.0.0.1 and reached from
//! the guest through a QEMU `guestfwd`), the NoCloud `cidata` ISO made from the rendered
//! user-data, data disks with the serial the DataVolume disk gets, and a private L2 link
//! (QEMU socket netdev on 127.0.0.1) between the guests of one scenario.
//!
//! Must not: modify a payload's user-data (scenarios pass it through unchanged; only the
//! harness's own self-test breaks one on purpose), or give a guest a route to anything outside
//! the test: user networking runs with `restrict=on` and no address of it is a gateway.

pub mod http;
pub mod qga;

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use qga::{ExecResult, Qga};

/// The image recipe; its text is the image cache key.
const IMAGE_RECIPE: &str = include_str!("build-image.sh");

/// A containerdisk name from which `auto` infers the debian family (what the suite renders for).
pub const DEBIAN_IMAGE: &str = "quay.io/containerdisks/debian:12";

/// The CPU the guests get under TCG. Nehalem (SSE4.2, no AVX): with `max`, glibc and Python
/// pick AVX2 code paths that TCG emulates slowly; a cpu guest alone reached its workload in
/// 147 s instead of 173 s. Debian's x86-64 baseline needs none of what it leaves out.
const GUEST_CPU_MODEL: &str = "Nehalem";

/// Where the guest reaches the harness's package repository (a `guestfwd` of user networking).
const REPO_GUEST_ADDR: &str = "10.0.2.100";

/// The private L2 network between the guests of one scenario.
pub const LINK_PREFIX: &str = "192.168.77";

/// A failed scenario: which workload, which step, and what the guest showed.
#[derive(Debug)]
pub struct Failure {
    pub workload: String,
    pub step: &'static str,
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "workload {}: step `{}` failed: {}",
            self.workload, self.step, self.detail
        )
    }
}

pub fn fail(workload: &str, step: &'static str, detail: impl Into<String>) -> Failure {
    Failure {
        workload: workload.to_string(),
        step,
        detail: detail.into(),
    }
}

/// Why the suite cannot run here, or `None` when it can. Asked only once the suite was opted
/// in to: under `VIRTWORK_GUEST_BOOT=1` a test returns early after printing this; under
/// `VIRTWORK_REQUIRE_GUEST_BOOT=1` it fails.
pub fn missing_tools() -> Option<String> {
    let tools = [
        "qemu-system-x86_64",
        "debootstrap",
        "genisoimage",
        "dpkg-scanpackages",
        "dpkg-deb",
        "sha256sum",
        "socat",
        "apt-get",
        "mkfs.ext4",
    ];
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|tool| !on_path(tool))
        .collect();
    if !missing.is_empty() {
        return Some(format!("missing tools: {}", missing.join(", ")));
    }
    if !is_root() {
        return Some("debootstrap needs root".to_string());
    }
    None
}

/// The opt-in to the real-guest suite: without it (or `VIRTWORK_REQUIRE_GUEST_BOOT=1`, which
/// implies it) no guest boots, whatever tools the machine has.
pub const OPT_IN: &str = "VIRTWORK_GUEST_BOOT";
/// "Must run, fail when it cannot": what CI sets.
pub const REQUIRE: &str = "VIRTWORK_REQUIRE_GUEST_BOOT";

/// What one guest test does on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Boot the guests.
    Run,
    /// Nobody asked for the suite: pass without booting (the binary says once how to run it).
    NotRequested,
    /// Listed in `VIRTWORK_GUEST_SKIP`.
    Listed,
    /// Asked for with `VIRTWORK_GUEST_BOOT=1` but impossible here: pass with a notice.
    Unavailable(String),
    /// Required with `VIRTWORK_REQUIRE_GUEST_BOOT=1` but impossible here: fail.
    Required(String),
}

/// Decides what `test` does from the environment (`env` looks a variable up) and, only when
/// the suite was asked for, from what the machine lacks (`missing`, see [`missing_tools`]).
pub fn gate(
    test: &str,
    env: impl Fn(&str) -> Option<String>,
    missing: impl FnOnce() -> Option<String>,
) -> Gate {
    let is_one = |name: &str| env(name).as_deref() == Some("1");
    let required = is_one(REQUIRE);
    if !required && !is_one(OPT_IN) {
        return Gate::NotRequested;
    }
    // A machine without the time for every guest (CI's budget) names what it leaves out.
    if env("VIRTWORK_GUEST_SKIP")
        .is_some_and(|skip| skip.split(',').any(|name| name.trim() == test))
    {
        return Gate::Listed;
    }
    match missing() {
        None => Gate::Run,
        Some(why) if required => Gate::Required(why),
        Some(why) => Gate::Unavailable(why),
    }
}

/// The one line a test binary prints when its guest tests were not asked for.
pub const NOT_REQUESTED: &str = "guest suite not run: real guests boot only with VIRTWORK_GUEST_BOOT=1 (as root, with QEMU; about 50 min on two cores), see README.md \"Test tiers\"";

/// Returns true when the test should boot its guests. Otherwise it says why and returns false
/// (or panics under `VIRTWORK_REQUIRE_GUEST_BOOT=1` when the suite cannot run here).
pub fn available(test: &str) -> bool {
    match gate(test, |name| std::env::var(name).ok(), missing_tools) {
        Gate::Run => true,
        Gate::NotRequested => {
            static SAID: std::sync::Once = std::sync::Once::new();
            // Straight to stderr, past the test harness's capture: a passing test's output is
            // hidden, and this line is for the person who ran `cargo test`.
            SAID.call_once(|| {
                let _ = writeln!(std::io::stderr(), "\n{NOT_REQUESTED}");
            });
            false
        }
        Gate::Listed => {
            eprintln!("SKIPPED {test}: listed in VIRTWORK_GUEST_SKIP");
            false
        }
        Gate::Unavailable(why) => {
            eprintln!("SKIPPED {test}: {why}; set {REQUIRE}=1 to make this a failure");
            false
        }
        Gate::Required(why) => panic!(
            "{test}: {REQUIRE}=1 but the guest suite cannot run: {why} (install qemu-system-x86, debootstrap, genisoimage, dpkg-dev, socat)"
        ),
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join(tool).is_file())
            || ["/usr/sbin", "/sbin"]
                .iter()
                .any(|d| Path::new(d).join(tool).is_file())
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// FNV-1a, 64 bits: a cache key, not a security boundary.
fn fnv(parts: &[&[u8]]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in *part {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The harness's working root under target/.
pub fn cache_root() -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest");
    fs::create_dir_all(&root).unwrap();
    root
}

/// Appends one line to the suite's figures file (target/tmp/guest/figures.log) and stderr.
pub fn record(line: &str) {
    eprintln!("[guest] {line}");
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cache_root().join("figures.log"))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

/// The Debian archive the image and the repository come from (`host-mirror.sh`, which
/// `.ci/run` also uses when it builds the image ahead of the tests).
fn host_mirror() -> String {
    let out = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/guest/host-mirror.sh"
        ))
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "host-mirror.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The image cache key: the first 16 hex digits of the recipe's SHA-256, which `.ci/run`
/// computes the same way (`sha256sum build-image.sh`) to build the image ahead of the tests.
fn recipe_key() -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(IMAGE_RECIPE.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..16].to_string()
}

/// The built image: root file system (raw, booted with snapshot=on), kernel, initrd.
pub struct Image {
    pub dir: PathBuf,
}

impl Image {
    pub fn root(&self) -> PathBuf {
        self.dir.join("root.raw")
    }
}

fn run_logged(cmd: &mut Command, log: &Path, what: &str) -> Result<(), String> {
    let file = fs::File::create(log).unwrap();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        let text = fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(25).collect();
        Err(format!(
            "{what} failed ({status}); log {}:\n{}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    }
}

/// Builds the image once per recipe, cached in target/tmp/guest/image-<key> (where `.ci/run`
/// may already have built it).
pub fn image() -> &'static Image {
    static IMAGE: OnceLock<Result<Image, String>> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let key = recipe_key();
            let dir = cache_root().join(format!("image-{key}"));
            if dir.join("root.raw").is_file() {
                return Ok(Image { dir });
            }
            let script = cache_root().join(format!("build-image-{key}.sh"));
            fs::write(&script, IMAGE_RECIPE).unwrap();
            let started = Instant::now();
            run_logged(
                Command::new("bash")
                    .arg(&script)
                    .arg(host_mirror())
                    .arg(&dir),
                &cache_root().join(format!("image-{key}.log")),
                "building the guest image",
            )?;
            record(&format!(
                "image build: {:.0} s (debootstrap bookworm, recipe {key})",
                started.elapsed().as_secs_f64()
            ));
            Ok(Image { dir })
        })
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The package names of every payload the suite boots: the local repository carries their
/// dependency closure.
fn payload_packages() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for args in [
        vec![],
        vec![
            "--from-catalog",
            "sysbench,redis-bench",
            "--catalog-dir",
            CATALOG_DIR,
        ],
    ] {
        let plan = render_plan(&args).unwrap_or_else(|e| panic!("{e}"));
        for secret in plan["secrets"].as_array().unwrap() {
            let user_data = secret["stringData"]["userdata"].as_str().unwrap();
            let doc: serde_yaml::Value = serde_yaml::from_str(user_data).unwrap();
            for package in doc["packages"].as_sequence().into_iter().flatten() {
                names.insert(package.as_str().unwrap().to_string());
            }
        }
    }
    names
}

const CATALOG_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/catalog");

/// The suite the image and the repository carry.
const SUITE: &str = "bookworm";

/// Runs apt with a private configuration: the host archive's `main` and `non-free` components
/// (the host's own sources may lack non-free, where Debian keeps netperf), its own lists and an
/// empty package database, so resolution yields every package's full dependency closure.
fn private_apt(tool: &str, work: &Path) -> Command {
    let mut apt = Command::new(tool);
    apt.arg(format!(
        "-oDir::Etc::sourcelist={}",
        work.join("sources.list").display()
    ))
    .arg("-oDir::Etc::sourceparts=/nonexistent")
    .arg(format!(
        "-oDir::State::Lists={}",
        work.join("lists").display()
    ))
    .arg(format!(
        "-oDir::State::status={}",
        work.join("status").display()
    ))
    .arg(format!(
        "-oDir::Cache::archives={}",
        work.join("debs").display()
    ))
    .arg("-oDir::Cache::pkgcache=")
    .arg("-oDir::Cache::srcpkgcache=")
    .arg("-oDebug::NoLocking=true")
    .arg("-oAcquire::Languages=none");
    apt
}

/// The local apt repository: every payload package with its full dependency closure, laid out
/// like a Debian mirror (`dists/bookworm/{main,non-free}`, `pool/`), so a payload that enables
/// a component on the guest's sources (tps enables non-free for netperf) really changes what
/// the guest can install.
pub fn repo() -> &'static PathBuf {
    static REPO: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    REPO.get_or_init(|| {
        let packages = payload_packages();
        let names: Vec<&str> = packages.iter().map(String::as_str).collect();
        let key = fnv(&[names.join(" ").as_bytes(), b"dists main non-free"]);
        let dir = cache_root().join(format!("repo-{key}"));
        if dir.join("dists").join(SUITE).join("Release").is_file() {
            return Ok(dir);
        }
        let work = cache_root().join(format!("repo-{key}.work"));
        let _ = fs::remove_dir_all(&work);
        for sub in ["debs/partial", "lists/partial"] {
            fs::create_dir_all(work.join(sub)).unwrap();
        }
        fs::write(work.join("status"), "").unwrap();
        fs::write(
            work.join("sources.list"),
            format!(
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {} {SUITE} main non-free\n",
                host_mirror()
            ),
        )
        .unwrap();
        let started = Instant::now();
        run_logged(
            private_apt("apt-get", &work).args(["-q", "update"]),
            &cache_root().join("repo-update.log"),
            "reading the archive's package lists",
        )?;
        // A package the archive does not carry stays out of the repository, so the payload
        // that names it fails in the guest exactly as it would on a stock image.
        let (list, absent): (Vec<&str>, Vec<&str>) = names.iter().partition(|p| {
            private_apt("apt-cache", &work)
                .args(["policy", p])
                .output()
                .is_ok_and(|o| {
                    let text = String::from_utf8_lossy(&o.stdout);
                    text.contains("Candidate:") && !text.contains("Candidate: (none)")
                })
        });
        run_logged(
            private_apt("apt-get", &work)
                .args(["-q", "-y", "--download-only", "--no-install-recommends"])
                .arg("install")
                .args(&list),
            &cache_root().join("repo-download.log"),
            "downloading the payload packages",
        )?;
        let (main, non_free) = file_debs_by_component(&work)?;
        let root = work.join("root");
        for component in ["main", "non-free"] {
            let index = Command::new("dpkg-scanpackages")
                .args(["-m", &format!("pool/{component}"), "/dev/null"])
                .current_dir(&root)
                .stderr(Stdio::null())
                .output()
                .map_err(|e| format!("dpkg-scanpackages: {e}"))?;
            if !index.status.success() {
                return Err(format!("dpkg-scanpackages pool/{component} failed"));
            }
            let binary = root.join(format!("dists/{SUITE}/{component}/binary-amd64"));
            fs::create_dir_all(&binary).unwrap();
            fs::write(binary.join("Packages"), &index.stdout).unwrap();
        }
        write_release(&root)?;
        let _ = fs::remove_dir_all(&dir);
        fs::rename(&root, &dir).unwrap();
        let _ = fs::remove_dir_all(&work);
        if !absent.is_empty() {
            record(&format!(
                "local repository: not in the Debian archive: {}",
                absent.join(", ")
            ));
        }
        record(&format!(
            "local repository: {} packages requested, closure of {main} main + {non_free} non-free debs downloaded and indexed in {:.0} s",
            list.len(),
            started.elapsed().as_secs_f64()
        ));
        Ok(dir)
    })
    .as_ref()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Moves the downloaded debs into `root/pool/<component>` by their Section (`non-free/net`
/// belongs to non-free); returns how many went to each.
fn file_debs_by_component(work: &Path) -> Result<(usize, usize), String> {
    let (mut main, mut non_free) = (0, 0);
    for component in ["main", "non-free"] {
        fs::create_dir_all(work.join("root/pool").join(component)).unwrap();
    }
    for entry in fs::read_dir(work.join("debs")).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "deb") {
            continue;
        }
        let section = Command::new("dpkg-deb")
            .args(["-f"])
            .arg(&path)
            .arg("Section")
            .output()
            .map_err(|e| format!("dpkg-deb: {e}"))?;
        let component = if String::from_utf8_lossy(&section.stdout).starts_with("non-free") {
            non_free += 1;
            "non-free"
        } else {
            main += 1;
            "main"
        };
        fs::rename(
            &path,
            work.join("root/pool")
                .join(component)
                .join(entry.file_name()),
        )
        .unwrap();
    }
    Ok((main, non_free))
}

/// The suite's Release file: apt reads a `dists/` repository only through it, and checks each
/// index against the SHA256 it lists (the repository itself is `trusted=yes`, unsigned).
fn write_release(root: &Path) -> Result<(), String> {
    let mut sums = String::new();
    for component in ["main", "non-free"] {
        let relative = format!("{component}/binary-amd64/Packages");
        let file = root.join(format!("dists/{SUITE}/{relative}"));
        let out = Command::new("sha256sum")
            .arg(&file)
            .output()
            .map_err(|e| format!("sha256sum: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let hash = text
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        let size = fs::metadata(&file).unwrap().len();
        sums.push_str(&format!(" {hash} {size} {relative}\n"));
    }
    // A day in the past: apt refuses a Release dated ahead of the guest's clock.
    let date = Command::new("date")
        .args(["-Ru", "-d", "-1 day"])
        .output()
        .map_err(|e| format!("date: {e}"))?;
    fs::write(
        root.join(format!("dists/{SUITE}/Release")),
        format!(
            "Origin: virtwork-test\nLabel: virtwork-test\nSuite: {SUITE}\nCodename: {SUITE}\nDate: {}\nArchitectures: amd64\nComponents: main non-free\nSHA256:\n{sums}",
            String::from_utf8_lossy(&date.stdout).trim()
        ),
    )
    .unwrap();
    Ok(())
}

/// The cloud-init modules a user-data document drives (by its top-level keys).
pub fn payload_modules(user_data: &str) -> Vec<String> {
    let doc: serde_yaml::Value = serde_yaml::from_str(user_data).unwrap_or_default();
    let mut modules = Vec::new();
    for key in doc
        .as_mapping()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| k.as_str())
    {
        let names: &[&str] = match key {
            "packages" | "package_update" | "package_upgrade" => &[
                "package-update-upgrade-install",
                "package_update_upgrade_install",
            ],
            "runcmd" => &["runcmd", "scripts-user", "scripts_user"],
            "bootcmd" => &["bootcmd"],
            "write_files" => &[
                "write-files",
                "write_files",
                "write-files-deferred",
                "write_files_deferred",
            ],
            "users" | "groups" => &["users-groups", "users_groups"],
            "apt" => &["apt-configure", "apt_configure"],
            other => &[other][..],
        };
        modules.extend(names.iter().map(|n| n.to_string()));
    }
    modules
}

/// The repository's HTTP server on 127.0.0.1 (one per test process).
pub fn repo_port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| http::serve(repo().clone()))
}

/// `virtwork run --dry-run --output json` for the debian family, through the real binary.
pub fn render_plan(extra: &[&str]) -> Result<Value, String> {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .args([
            "run",
            "--dry-run",
            "--output",
            "json",
            "--no-audit",
            "--container-disk-image",
            DEBIAN_IMAGE,
            // The harness checks each VM's workload readiness probe, which a VM carries only
            // when workload readiness is asked for.
            "--ready-condition",
            "workload",
        ])
        .args(extra)
        .current_dir(home.path())
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", home.path().join("none"))
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "virtwork run --dry-run {extra:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("dry-run JSON: {e}"))
}

/// One VM of a rendered plan, as the harness boots it.
#[derive(Debug, Clone)]
pub struct VmSpec {
    pub name: String,
    pub workload: String,
    pub role: Option<String>,
    pub user_data: String,
    pub cores: u32,
    pub memory_mib: u64,
    /// (serial, size in GiB) of the data disk, when the workload has one.
    pub data_disk: Option<(String, u64)>,
    /// The readinessProbe's `httpGet` (guest port, path), as the kubelet would send it
    /// through the launcher pod's masquerade forward.
    pub probe: Option<(u16, String)>,
}

fn quantity_mib(q: &str) -> u64 {
    if let Some(gi) = q.strip_suffix("Gi") {
        gi.parse::<u64>().unwrap() * 1024
    } else if let Some(mi) = q.strip_suffix("Mi") {
        mi.parse().unwrap()
    } else {
        panic!("unexpected quantity {q}")
    }
}

/// The VMs of a plan, with their user-data taken from the plan's Secrets unchanged.
pub fn vms_of(plan: &Value) -> Vec<VmSpec> {
    let secrets = plan["secrets"].as_array().unwrap();
    plan["vms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|vm| {
            let name = vm["metadata"]["name"].as_str().unwrap().to_string();
            let labels = &vm["metadata"]["labels"];
            let template = &vm["spec"]["template"]["spec"];
            let secret_name = template["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|v| v["cloudInitNoCloud"]["secretRef"]["name"].as_str())
                .expect("a cloudInitNoCloud volume");
            let user_data = secrets
                .iter()
                .find(|s| s["metadata"]["name"] == secret_name)
                .and_then(|s| s["stringData"]["userdata"].as_str())
                .expect("the VM's Secret")
                .to_string();
            let data_volume = template["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v.get("dataVolume").is_some());
            let data_disk = data_volume.map(|volume| {
                let disk = template["domain"]["devices"]["disks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|d| d["name"] == volume["name"])
                    .expect("the data volume's disk");
                let dv_name = volume["dataVolume"]["name"].as_str().unwrap();
                let dv = vm["spec"]["dataVolumeTemplates"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["metadata"]["name"] == dv_name)
                    .expect("the DataVolume template");
                let size = dv["spec"]["storage"]["resources"]["requests"]["storage"]
                    .as_str()
                    .unwrap();
                (
                    disk["serial"]
                        .as_str()
                        .expect("data disk serial")
                        .to_string(),
                    quantity_mib(size) / 1024,
                )
            });
            VmSpec {
                workload: labels["app.kubernetes.io/component"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                role: labels["virtwork/role"].as_str().map(str::to_string),
                user_data,
                cores: template["domain"]["cpu"]["cores"].as_u64().unwrap() as u32,
                memory_mib: quantity_mib(
                    template["domain"]["resources"]["requests"]["memory"]
                        .as_str()
                        .unwrap(),
                ),
                data_disk,
                probe: template["readinessProbe"]["httpGet"]["port"]
                    .as_u64()
                    .map(|port| {
                        let path = template["readinessProbe"]["httpGet"]["path"]
                            .as_str()
                            .unwrap_or("/");
                        (u16::try_from(port).unwrap(), path.to_string())
                    }),
                name,
            }
        })
        .collect()
}

/// Guests running at once: the machine has two cores and TCG is CPU bound.
const GUEST_SLOTS: usize = 2;

static SLOTS: Mutex<usize> = Mutex::new(0);
static SLOTS_FREED: Condvar = Condvar::new();

/// Holds `n` of the guest slots until dropped.
pub struct Slots(usize);

pub fn take_slots(n: usize) -> Slots {
    let mut used = SLOTS.lock().unwrap();
    while *used + n > GUEST_SLOTS {
        used = SLOTS_FREED.wait(used).unwrap();
    }
    *used += n;
    Slots(n)
}

impl Drop for Slots {
    fn drop(&mut self) {
        *SLOTS.lock().unwrap() -= self.0;
        SLOTS_FREED.notify_all();
    }
}

/// How a guest is attached to the private link of its scenario.
#[derive(Debug, Clone)]
pub struct Link {
    /// `listen` for the first guest, `connect` for the second.
    pub listen: bool,
    pub port: u16,
    /// Last octet of the guest's address on the link.
    pub host: u8,
}

/// A free TCP port on 127.0.0.1 (for a socket netdev).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A booted guest: its QEMU process and guest agent. Dropping it kills QEMU.
pub struct Guest {
    pub spec: VmSpec,
    pub dir: PathBuf,
    pub started: Instant,
    child: Child,
    pub qga: Qga,
    /// QEMU's arguments, for a migration's destination process.
    args: Vec<std::ffi::OsString>,
    /// How many times it was live-migrated (names the destination's files).
    migrations: usize,
    /// The host port QEMU forwards to the readiness probe's guest port.
    probe_port: Option<u16>,
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("VIRTWORK_GUEST_KEEP").is_none() {
            let _ = fs::remove_file(self.dir.join("data.raw"));
        }
    }
}

fn mac(index: u8, nic: u8) -> String {
    format!("52:54:00:77:{nic:02x}:{index:02x}")
}

/// Boots `spec` with its user-data as a NoCloud cidata ISO, a data disk when it has one, user
/// networking restricted to the repository forward, and optionally the private link.
/// `hosts` are extra /etc/hosts entries (ip, name) the image's hosts unit writes at boot.
pub fn boot(
    spec: &VmSpec,
    link: Option<&Link>,
    hosts: &[(String, String)],
) -> Result<Guest, Failure> {
    boot_with(spec, link, hosts, false)
}

/// [`boot`], and with `migratable` ready for a live migration to a second QEMU process on
/// this host: the root disk is the guest's own sparse copy of the image (shared storage: the
/// destination opens the same file, which `snapshot=on`'s private overlay would not allow),
/// and QEMU has a QMP socket.
pub fn boot_with(
    spec: &VmSpec,
    link: Option<&Link>,
    hosts: &[(String, String)],
    migratable: bool,
) -> Result<Guest, Failure> {
    let image = image();
    let port = repo_port();
    // Unique per boot: two tests may boot guests of the same name at once (the broken-payload
    // check renders the cpu workload too), and QEMU locks its pid file.
    static BOOTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let boot_number = BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = cache_root().join("runs").join(format!(
        "{}-{}-{boot_number}",
        spec.name,
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("cidata")).unwrap();
    let index = link.map_or(1, |l| l.host);

    // NoCloud seed, as KubeVirt's cloudInitNoCloud presents it: user-data unchanged.
    let seed = dir.join("cidata");
    fs::write(seed.join("user-data"), &spec.user_data).unwrap();
    fs::write(
        seed.join("meta-data"),
        format!("instance-id: {0}\nlocal-hostname: {0}\n", spec.name),
    )
    .unwrap();
    let mut network = format!(
        "version: 2\nethernets:\n  mgmt:\n    match:\n      macaddress: \"{}\"\n    addresses: [10.0.2.15/24]\n",
        mac(index, 0)
    );
    if let Some(link) = link {
        network.push_str(&format!(
            "  link:\n    match:\n      macaddress: \"{}\"\n    addresses: [{LINK_PREFIX}.{}/24]\n",
            mac(index, 1),
            link.host
        ));
    }
    fs::write(seed.join("network-config"), network).unwrap();
    let iso = dir.join("cidata.iso");
    let out = Command::new("genisoimage")
        .args(["-quiet", "-output"])
        .arg(&iso)
        .args(["-volid", "cidata", "-joliet", "-rock"])
        .arg(seed.join("user-data"))
        .arg(seed.join("meta-data"))
        .arg(seed.join("network-config"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "genisoimage: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // wait-online would hold cloud-init back for minutes under TCG; the addresses are static
    // and the package installation that needs them runs in the final stage.
    let mut append = String::from(
        "root=/dev/vda rw console=ttyS0 quiet net.ifnames=0 panic=-1 systemd.mask=systemd-networkd-wait-online.service",
    );
    if !hosts.is_empty() {
        let entries: Vec<String> = hosts
            .iter()
            .map(|(ip, name)| format!("{ip}:{name}"))
            .collect();
        append.push_str(&format!(" virtwork.hosts={}", entries.join(",")));
    }
    let qga_path = dir.join("qga.sock");
    let mut cmd = Command::new("qemu-system-x86_64");
    // One host thread per guest: two guests with multi-threaded TCG put four vCPU threads on
    // two cores and wait on each other (guest agent up after 150 s instead of 130 s).
    cmd.args([
        "-accel",
        "tcg,thread=single",
        "-cpu",
        GUEST_CPU_MODEL,
        "-machine",
        "q35",
    ])
    .args([
        "-smp",
        &spec.cores.to_string(),
        "-m",
        &spec.memory_mib.to_string(),
    ])
    .args(["-display", "none", "-no-reboot", "-nodefaults"])
    .arg("-pidfile")
    .arg(dir.join("qemu.pid"))
    .arg("-kernel")
    .arg(image.dir.join("vmlinuz"))
    .arg("-initrd")
    .arg(image.dir.join("initrd.img"))
    .args(["-append", &append])
    .arg("-serial")
    .arg(format!("file:{}", dir.join("console.log").display()))
    // Disks in the VM spec's order: containerdisk, cloudinitdisk, datadisk.
    .arg("-drive")
    // snapshot=on: the guest's writes go to a temporary overlay, never to the cached image.
    .arg(root_drive(&image.root(), &dir, migratable))
    .args(["-device", "virtio-blk-pci,drive=root"])
    .arg("-drive")
    .arg(format!(
        "file={},if=none,id=cidata,format=raw,readonly=on",
        iso.display()
    ))
    .args(["-device", "virtio-blk-pci,drive=cidata"]);
    if let Some((serial, gib)) = &spec.data_disk {
        // A blank, sparse disk of the DataVolume's size.
        let data = dir.join("data.raw");
        fs::File::create(&data).unwrap().set_len(gib << 30).unwrap();
        cmd.arg("-drive")
            .arg(format!(
                "file={},if=none,id=data,format=raw",
                data.display()
            ))
            .args([
                "-device",
                &format!("virtio-blk-pci,drive=data,serial={serial}"),
            ]);
    }
    // User networking: no DHCP gateway the guest uses (its address is static, without a
    // route), `restrict=on` so nothing leaves the host, one forward to the repository and,
    // for a probed VM, one from the host to the probe's guest port: the path the kubelet's
    // HTTP probe takes through the launcher pod's masquerade forward.
    let probe_port = spec.probe.as_ref().map(|_| free_port());
    let mut netdev = format!(
        "user,id=mgmt,restrict=on,ipv6=off,net=10.0.2.0/24,guestfwd=tcp:{REPO_GUEST_ADDR}:80-cmd:socat STDIO TCP:127.0.0.1:{port}"
    );
    if let (Some(host), Some((guest, _))) = (probe_port, &spec.probe) {
        netdev.push_str(&format!(",hostfwd=tcp:127.0.0.1:{host}-10.0.2.15:{guest}"));
    }
    cmd.arg("-netdev").arg(netdev);
    cmd.args([
        "-device",
        &format!("virtio-net-pci,netdev=mgmt,mac={}", mac(index, 0)),
    ]);
    if let Some(link) = link {
        let mode = if link.listen { "listen" } else { "connect" };
        cmd.args([
            "-netdev",
            &format!("socket,id=link,{mode}=127.0.0.1:{}", link.port),
        ]);
        cmd.args([
            "-device",
            &format!("virtio-net-pci,netdev=link,mac={}", mac(index, 1)),
        ]);
    }
    cmd.arg("-chardev")
        .arg(format!(
            "socket,id=qga0,path={},server=on,wait=off",
            qga_path.display()
        ))
        .args(["-device", "virtio-serial-pci"])
        .args([
            "-device",
            "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
        ]);
    if migratable {
        cmd.arg("-qmp").arg(format!(
            "unix:{},server=on,wait=off",
            dir.join("qmp.sock").display()
        ));
    }
    let args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_os_string()).collect();
    let log = fs::File::create(dir.join("qemu.log")).unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .map_err(|e| fail(&spec.workload, "boot", format!("qemu-system-x86_64: {e}")))?;
    let started = Instant::now();
    // The socket appears as soon as QEMU has parsed its options.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !qga_path.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut guest = Guest {
        spec: spec.clone(),
        dir: dir.clone(),
        started,
        child,
        qga: Qga::new(qga_path),
        args,
        migrations: 0,
        probe_port,
    };
    if let Ok(Some(status)) = guest.child.try_wait() {
        return Err(fail(
            &spec.workload,
            "boot",
            format!(
                "QEMU exited ({status}): {}",
                fs::read_to_string(dir.join("qemu.log")).unwrap_or_default()
            ),
        ));
    }
    Ok(guest)
}

/// The root disk's `-drive` option: the cached image behind a private overlay, or (for a
/// guest that will migrate) a sparse copy of it in the guest's directory, which both QEMU
/// processes open.
fn root_drive(root: &Path, dir: &Path, migratable: bool) -> String {
    if !migratable {
        return format!(
            "file={},if=none,id=root,format=raw,snapshot=on",
            root.display()
        );
    }
    let copy = dir.join("root.raw");
    let out = Command::new("cp")
        .args(["--sparse=always", "--reflink=auto"])
        .arg(root)
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cp: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "file={},if=none,id=root,format=raw,cache=none,aio=threads",
        copy.display()
    )
}

/// One QMP command on the socket at `path` (a connection per command: QEMU serves one
/// client at a time); its `return`, or the error QEMU gave.
pub fn qmp(path: &Path, command: &Value) -> Result<Value, String> {
    use std::io::BufRead;
    let stream =
        std::os::unix::net::UnixStream::connect(path).map_err(|e| format!("QMP connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut answer = |request: &Value| -> Result<Value, String> {
        writer
            .write_all(format!("{request}\n").as_bytes())
            .map_err(|e| format!("QMP write: {e}"))?;
        loop {
            let mut line = String::new();
            reader
                .read_line(&mut line)
                .map_err(|e| format!("QMP read: {e}"))?;
            let v: Value = serde_json::from_str(&line).map_err(|e| format!("QMP {line:?}: {e}"))?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(format!("QMP error: {e}"));
            }
            // The greeting and events are skipped.
        }
    };
    answer(&serde_json::json!({"execute": "qmp_capabilities"}))?;
    answer(command)
}

/// What one live migration took, as QEMU's `query-migrate` reports it.
#[derive(Debug, Clone)]
pub struct MigrationFigures {
    /// From the `migrate` command to completion.
    pub total_ms: u64,
    /// The guest's pause: its last dirty pages copied with its vCPUs stopped.
    pub downtime_ms: u64,
    /// RAM sent, in MiB.
    pub transferred_mib: f64,
    /// When the destination took over (host clock, Unix ms).
    pub switched_at_ms: u64,
}

fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// How long a destination QEMU may take to answer QMP and listen for the migration: seconds
/// when the host is idle, tens of seconds with two TCG guests and compilers on two cores.
const INCOMING_TIMEOUT: Duration = Duration::from_secs(90);

/// How long a live migration may run before the case fails: a 1 GiB TCG guest moves in a few
/// seconds over loopback; this bounds a migration that never converges.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(120);

/// A QEMU process the harness ends unless it hands it on (a destination that never took
/// over, a source that did its part).
struct Qemu(Option<Child>);

impl Qemu {
    fn take(&mut self) -> Child {
        self.0
            .take()
            .expect("the QEMU process was already handed on")
    }

    fn end(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        self.end();
    }
}

/// Why a destination QEMU is not ready for a migration.
enum Incoming {
    /// It ended (for one, its port was taken after [`free_port`] released it).
    Exited(String),
    /// It runs, but did not reach `inmigrate` with its port listening in time.
    NotReady(String),
}

/// Waits until the destination answers QMP `query-status` with `inmigrate` and the kernel
/// lists a socket listening on 127.0.0.1:`port`. The port is read from /proc/net/tcp rather
/// than connected to: QEMU takes the first connection as the migration stream.
fn wait_incoming(
    destination: &mut Qemu,
    qmp_path: &Path,
    port: u16,
    timeout: Duration,
) -> Result<(), Incoming> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("no QMP socket yet");
    loop {
        if let Some(child) = destination.0.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(Incoming::Exited(format!("QEMU exited ({status})")));
        }
        if qmp_path.exists() {
            match qmp(qmp_path, &serde_json::json!({"execute": "query-status"})) {
                Ok(status) if status["status"] == "inmigrate" && listening(port) => return Ok(()),
                Ok(status) => last = format!("status {status}, listening: {}", listening(port)),
                Err(e) => last = e,
            }
        }
        if Instant::now() > deadline {
            return Err(Incoming::NotReady(format!(
                "after {} s: {last}",
                timeout.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether a TCP socket listens on 127.0.0.1:`port` (a /proc/net/tcp row with local address
/// `0100007F:<port hex>` in state 0A, LISTEN).
fn listening(port: u16) -> bool {
    let local = format!("0100007F:{port:04X}");
    fs::read_to_string("/proc/net/tcp").is_ok_and(|table| {
        table.lines().skip(1).any(|row| {
            let fields: Vec<&str> = row.split_whitespace().collect();
            fields.get(1) == Some(&local.as_str()) && fields.get(3) == Some(&"0A")
        })
    })
}

impl Guest {
    /// Live-migrates the guest to a second QEMU process started with the same arguments and
    /// `-incoming` on a loopback TCP port (its own QMP, agent socket, pid file and console),
    /// over QMP `migrate`; once QEMU reports completion the source process is ended and the
    /// guest agent is reached through the destination. Needs [`boot_with`]`(.., true)`.
    pub fn live_migrate(&mut self) -> Result<MigrationFigures, Failure> {
        let step = "live migration";
        self.migrations += 1;
        let n = self.migrations;
        let source_qmp = match n {
            1 => self.dir.join("qmp.sock"),
            _ => self.dir.join(format!("qmp-{}.sock", n - 1)),
        };
        let probe_port = self.probe_port.map(|_| free_port());
        let rename = |arg: &std::ffi::OsString| -> std::ffi::OsString {
            let text = arg.to_string_lossy().into_owned();
            let mut out = text.clone();
            for file in ["qga", "qmp"] {
                let from = match n {
                    1 => format!("{file}.sock"),
                    _ => format!("{file}-{}.sock", n - 1),
                };
                out = out.replace(&from, &format!("{file}-{n}.sock"));
            }
            for (file, ext) in [("qemu", "pid"), ("console", "log")] {
                out = out.replace(&format!("{file}.{ext}"), &format!("{file}-{n}.{ext}"));
            }
            // The source holds the probe's host port until it ends: the destination forwards
            // another one, which the probe uses from the switch-over on.
            if let (Some(from), Some(to)) = (self.probe_port, probe_port) {
                out = out.replace(
                    &format!("hostfwd=tcp:127.0.0.1:{from}-"),
                    &format!("hostfwd=tcp:127.0.0.1:{to}-"),
                );
            }
            out.into()
        };
        // The destination must be listening before `migrate` is sent, or the source fails at
        // once with "Connection refused" (seen under load: QEMU takes seconds to reach its
        // `-incoming` listen). A port another process took between `free_port` and QEMU's
        // bind ends the destination: it is started again on a new port, a bounded number of
        // times.
        let dest_qmp = self.dir.join(format!("qmp-{n}.sock"));
        let mut attempt = 0;
        let (mut destination, port) = loop {
            attempt += 1;
            let port = free_port();
            let log = fs::File::create(self.dir.join(format!("qemu-{n}.log"))).unwrap();
            let _ = fs::remove_file(&dest_qmp);
            let child = Command::new("qemu-system-x86_64")
                .args(self.args.iter().map(rename))
                .args(["-incoming", &format!("tcp:127.0.0.1:{port}")])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .map_err(|e| self.fail(step, format!("destination QEMU: {e}")))?;
            let mut destination = Qemu(Some(child));
            match wait_incoming(&mut destination, &dest_qmp, port, INCOMING_TIMEOUT) {
                Ok(()) => break (destination, port),
                Err(Incoming::Exited(why)) if attempt < 3 => {
                    record(&format!(
                        "live migration: destination on port {port} ended before listening ({why}); starting it again"
                    ));
                }
                Err(Incoming::Exited(why) | Incoming::NotReady(why)) => {
                    let log = fs::read_to_string(self.dir.join(format!("qemu-{n}.log")))
                        .unwrap_or_default();
                    return Err(self.fail(
                        step,
                        format!("destination QEMU not ready for the migration: {why}; log: {log}"),
                    ));
                }
            }
        };
        let workload = self.spec.workload.clone();
        let qmp_err = |e: String| fail(&workload, step, e);
        qmp(
            &source_qmp,
            &serde_json::json!({"execute": "migrate-set-parameters",
            "arguments": {"max-bandwidth": 4_294_967_296u64, "downtime-limit": 300}}),
        )
        .map_err(qmp_err)?;
        qmp(
            &source_qmp,
            &serde_json::json!({"execute": "migrate",
            "arguments": {"uri": format!("tcp:127.0.0.1:{port}")}}),
        )
        .map_err(qmp_err)?;
        let deadline = Instant::now() + MIGRATION_TIMEOUT;
        let info = loop {
            let info = qmp(
                &source_qmp,
                &serde_json::json!({"execute": "query-migrate"}),
            )
            .map_err(qmp_err)?;
            match info["status"].as_str() {
                Some("completed") => break info,
                Some("failed" | "cancelled") => {
                    return Err(fail(&self.spec.workload, step, format!("QEMU: {info}")));
                }
                _ if Instant::now() > deadline => {
                    // Cancelled so the source keeps running and is ended by the guest's drop.
                    let _ = qmp(
                        &source_qmp,
                        &serde_json::json!({"execute": "migrate_cancel"}),
                    );
                    return Err(fail(
                        &self.spec.workload,
                        step,
                        format!("not over after {} s: {info}", MIGRATION_TIMEOUT.as_secs()),
                    ));
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let switched_at_ms = unix_millis();
        // The source is done: the guest now runs in the destination, which must say so.
        let mut source = Qemu(Some(std::mem::replace(&mut self.child, destination.take())));
        source.end();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status =
                qmp(&dest_qmp, &serde_json::json!({"execute": "query-status"})).map_err(qmp_err)?;
            match status["status"].as_str() {
                Some("running") => break,
                _ if Instant::now() > deadline => {
                    return Err(fail(
                        &self.spec.workload,
                        step,
                        format!("destination not running 30 s after completion: {status}"),
                    ));
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        self.qga = Qga::new(self.dir.join(format!("qga-{n}.sock")));
        self.probe_port = probe_port;
        Ok(MigrationFigures {
            total_ms: info["total-time"].as_u64().unwrap_or(0),
            downtime_ms: info["downtime"].as_u64().unwrap_or(0),
            transferred_mib: info["ram"]["transferred"].as_f64().unwrap_or(0.0) / 1_048_576.0,
            switched_at_ms,
        })
    }

    fn workload(&self) -> &str {
        &self.spec.workload
    }

    pub fn fail(&self, step: &'static str, detail: impl Into<String>) -> Failure {
        fail(
            &format!("{} ({})", self.workload(), self.spec.name),
            step,
            detail,
        )
    }

    /// Runs a shell command in the guest through guest-exec.
    pub fn sh(&mut self, command: &str, timeout: Duration) -> Result<ExecResult, String> {
        self.qga.exec(&["/bin/sh", "-c", command], timeout)
    }

    /// Runs `command` under bash, for its builtins (`$EPOCHREALTIME`, `read`).
    pub fn bash(&mut self, command: &str, timeout: Duration) -> Result<ExecResult, String> {
        self.qga.exec(&["/bin/bash", "-c", command], timeout)
    }

    /// Runs `command`; its stdout when it exits 0, else a failure of `step`.
    pub fn check(&mut self, step: &'static str, command: &str) -> Result<String, Failure> {
        match self.sh(command, Duration::from_secs(120)) {
            Ok(r) if r.code == 0 => Ok(r.stdout),
            Ok(r) => Err(self.fail(
                step,
                format!("`{command}` exited {}: {}{}", r.code, r.stdout, r.stderr),
            )),
            Err(e) => Err(self.fail(step, format!("`{command}`: {e}"))),
        }
    }

    fn console_tail(&self) -> String {
        let text = fs::read_to_string(self.dir.join("console.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(15).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Waits for the guest agent to answer.
    pub fn wait_agent(&mut self, timeout: Duration) -> Result<(), Failure> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(self.fail(
                    "boot",
                    format!("QEMU exited ({status}); console:\n{}", self.console_tail()),
                ));
            }
            if self.qga.sync(Duration::from_secs(3)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.fail(
                    "guest agent",
                    format!(
                        "no answer after {}s; console:\n{}",
                        timeout.as_secs(),
                        self.console_tail()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    /// The readiness probe exactly as the VM spec has it: passes when the GET through the
    /// forwarded port is answered 200, as the kubelet judges an HTTP probe.
    pub fn probe(&mut self) -> Result<bool, String> {
        Ok(self.probe_answer()?.starts_with("HTTP/1.0 200 "))
    }

    /// The raw answer (status line, headers, body) to the readiness probe's GET, sent from
    /// the host through the forwarded port within the probe's 10 s; empty when the guest
    /// refused or dropped the connection (nothing listening yet).
    pub fn probe_answer(&mut self) -> Result<String, String> {
        use std::io::{Read, Write};
        let (Some(host), Some((_, path))) = (self.probe_port, &self.spec.probe) else {
            return Err(format!("{} carries no readiness probe", self.spec.name));
        };
        let timeout = Duration::from_secs(10);
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", host))
            .map_err(|e| format!("connecting to the forwarded probe port: {e}"))?;
        stream.set_read_timeout(Some(timeout)).unwrap();
        stream.set_write_timeout(Some(timeout)).unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: 10.0.2.15\r\nUser-Agent: kube-probe/1.31\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        if stream.write_all(request.as_bytes()).is_err() {
            return Ok(String::new());
        }
        let mut answer = Vec::new();
        // A reset or a timeout leaves what arrived, which then fails as the kubelet fails it.
        let _ = stream.take(64 * 1024).read_to_end(&mut answer);
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }

    /// Whether cloud-init's final stage has ended: result.json appears then (`cloud-init
    /// status` itself takes tens of seconds to start under TCG). `test` is run without a
    /// shell: under TCG every process the harness starts in the guest slows its boot.
    fn cloud_init_finished(&mut self) -> bool {
        self.qga
            .exec(
                &["/usr/bin/test", "-f", "/run/cloud-init/result.json"],
                Duration::from_secs(30),
            )
            .is_ok_and(|r| r.code == 0)
    }

    /// Polls [`Guest::cloud_init_finished`] every 5 s until it holds (true) or `deadline`
    /// passes (false): sparsely, as each poll is a process in a guest whose boot is CPU-bound
    /// under TCG.
    fn cloud_init_finished_by(&mut self, deadline: Instant) -> bool {
        loop {
            if self.cloud_init_finished() {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_secs(5));
        }
    }

    /// Waits for cloud-init to finish and the readiness probe to pass. Checks that the probe
    /// was false before it became true, that cloud-init reports no error, and that no
    /// workload traffic can leave through another interface than the scenario's link.
    /// Returns seconds from QEMU start to the probe passing.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<f64, Failure> {
        self.wait_agent(Duration::from_secs(600))?;
        eprintln!(
            "[guest] {}: guest agent answers after {:.0} s",
            self.spec.name,
            self.started.elapsed().as_secs_f64()
        );
        // The agent starts long before cloud-init's final stage writes the workload's units,
        // so this first probe must fail; one that passes cannot tell a started workload from
        // one that is not. A probe that times out counts as failed, as it does for KubeVirt.
        if self.probe().unwrap_or(false) {
            return Err(self.fail(
                "readiness probe",
                "the probe passed at its first run, before the unit could have started: it cannot tell a started workload from one that is not",
            ));
        }
        let deadline = self.started + timeout;
        if !self.cloud_init_finished_by(deadline) {
            return Err(self.not_ready("still running"));
        }
        eprintln!(
            "[guest] {}: cloud-init finished after {:.0} s",
            self.spec.name,
            self.started.elapsed().as_secs_f64()
        );
        self.check_cloud_init()?;
        self.check_routes()?;
        let deadline = deadline.min(Instant::now() + Duration::from_secs(600));
        loop {
            if self.probe().unwrap_or(false) {
                return Ok(self.started.elapsed().as_secs_f64());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready("done"));
            }
            std::thread::sleep(Duration::from_secs(3));
        }
    }

    fn not_ready(&mut self, cloud_init: &str) -> Failure {
        let status = self.unit_report();
        self.fail(
            "unit active",
            format!(
                "readiness probe {:?} still false after {:.0}s (cloud-init {cloud_init}):\n{status}",
                self.spec.probe,
                self.started.elapsed().as_secs_f64(),
            ),
        )
    }

    /// Waits for cloud-init's final stage to end (whatever its result); seconds from QEMU start.
    pub fn wait_cloud_init(&mut self, timeout: Duration) -> Result<f64, Failure> {
        self.wait_agent(Duration::from_secs(600))?;
        if !self.cloud_init_finished_by(self.started + timeout) {
            return Err(self.fail(
                "cloud-init",
                format!(
                    "not finished after {:.0}s; console:\n{}",
                    self.started.elapsed().as_secs_f64(),
                    self.console_tail()
                ),
            ));
        }
        self.check_routes()?;
        Ok(self.started.elapsed().as_secs_f64())
    }

    /// `systemctl status` and the journal's last lines of the workload's units: what a
    /// failure report carries, so a CI log alone says why.
    pub fn unit_report(&mut self) -> String {
        let units = self.units();
        self.sh(
            &format!(
                "systemctl --no-pager status {} 2>&1 | tail -n 30; journalctl --no-pager -n 40 -u {} 2>&1",
                units.join(" "),
                units.join(" -u ")
            ),
            Duration::from_secs(30),
        )
        .map(|r| r.stdout)
        .unwrap_or_default()
    }

    /// `failure` with this guest's unit report appended.
    pub fn explain(&mut self, mut failure: Failure) -> Failure {
        let report = self.unit_report();
        failure
            .detail
            .push_str(&format!("\n--- {} units:\n{report}", self.spec.name));
        failure
    }

    /// The units the readiness probe checks: those the readiness endpoint's responder
    /// loops over (`for unit in A B; do`) in the user-data.
    pub fn units(&self) -> Vec<String> {
        self.spec
            .user_data
            .lines()
            .find_map(|l| l.trim().strip_prefix("for unit in ")?.strip_suffix("; do"))
            .map(|units| units.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// cloud-init's own account of the run: no module failed.
    fn check_cloud_init(&mut self) -> Result<(), Failure> {
        let result = self
            .sh("cat /run/cloud-init/result.json", Duration::from_secs(30))
            .map_err(|e| self.fail("cloud-init", e))?;
        let parsed: Value = serde_json::from_str(&result.stdout).map_err(|e| {
            self.fail(
                "cloud-init",
                format!("result.json unreadable ({e}): {}", result.stdout),
            )
        })?;
        let all: Vec<String> = parsed["v1"]["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
            .collect();
        // Only the modules the payload drives count: the image's own first-boot modules
        // (e.g. `locale`, with no locales package in a minbase image) are not the payload's.
        let modules = payload_modules(&self.spec.user_data);
        let errors: Vec<&String> = all
            .iter()
            .filter(|e| {
                modules
                    .iter()
                    .any(|m| e.contains(m.as_str()) || e.contains(&m.replace('-', "_")))
            })
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        let log = self
            .sh(
                "grep -E '^(E:|W: |Err|Traceback)|[Ff]ailed|[Ee]rror' /var/log/cloud-init-output.log | tail -n 12",
                Duration::from_secs(30),
            )
            .map(|r| r.stdout)
            .unwrap_or_default();
        Err(self.fail(
            "cloud-init modules",
            format!(
                "cloud-init reported {}; cloud-init-output.log:\n{log}",
                errors
                    .iter()
                    .map(|e| e.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ))
    }

    /// No default route and nothing routed beyond the two local networks: a connection to
    /// any other address (a Service IP, the internet) fails in the guest itself.
    fn check_routes(&mut self) -> Result<(), Failure> {
        let v6 = self.check(
            "routes",
            "ip -6 route show default; ip -6 addr show scope global",
        )?;
        if !v6.trim().is_empty() {
            return Err(self.fail(
                "routes",
                format!("the guest has IPv6 routes or addresses beyond link-local: {v6}"),
            ));
        }
        let routes = self.check("routes", "ip -4 route show table all type unicast")?;
        for route in routes.lines() {
            let allowed = route.starts_with("10.0.2.0/24 ")
                || route.starts_with(&format!("{LINK_PREFIX}.0/24 "))
                || route.contains("table local");
            if !allowed {
                return Err(self.fail(
                    "routes",
                    format!("unexpected route `{route}`: a guest must reach nothing outside the test (all routes: {routes})"),
                ));
            }
        }
        Ok(())
    }
}

/// The /etc/hosts entries that make every Service of `plan` resolve to `ip` (the server guest
/// on the private link), under the names a pod would use.
pub fn service_hosts(plan: &Value, ip: &str) -> Vec<(String, String)> {
    let mut entries = Vec::new();
    for service in plan["services"].as_array().into_iter().flatten() {
        let name = service["metadata"]["name"].as_str().unwrap();
        let namespace = service["metadata"]["namespace"].as_str().unwrap();
        for alias in [
            format!("{name}.{namespace}.svc.cluster.local"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}"),
            name.to_string(),
        ] {
            entries.push((ip.to_string(), alias));
        }
    }
    entries
}

impl Guest {
    /// The guest's interface on the private link.
    pub fn link_dev(&mut self) -> Result<String, Failure> {
        let out = self.check(
            "private link",
            &format!("ip -o -4 addr show to {LINK_PREFIX}.0/24 | awk '{{print $2}}'"),
        )?;
        let dev = out.trim().to_string();
        if dev.is_empty() {
            return Err(self.fail(
                "private link",
                "no address on the private link: the NoCloud network-config was not applied",
            ));
        }
        Ok(dev)
    }

    /// `name` resolves to `ip` and the route to it leaves through the private link only.
    pub fn check_reaches_over_link(&mut self, name: &str, ip: &str) -> Result<(), Failure> {
        let dev = self.link_dev()?;
        let resolved = self.check(
            "service name",
            &format!("getent hosts {name} | awk '{{print $1}}'"),
        )?;
        if resolved.trim() != ip {
            return Err(self.fail(
                "service name",
                format!(
                    "{name} resolves to {:?}, expected the server guest {ip}",
                    resolved.trim()
                ),
            ));
        }
        let route = self.check("routes", &format!("ip -4 route get {ip}"))?;
        if !route.contains(&format!("dev {dev} ")) {
            return Err(self.fail(
                "routes",
                format!(
                    "traffic to {ip} would leave through `{route}`, not the private link {dev}"
                ),
            ));
        }
        Ok(())
    }

    /// Bytes received on the private link over `secs` seconds.
    pub fn link_rx_bytes(&mut self, secs: u64) -> Result<u64, Failure> {
        let dev = self.link_dev()?;
        let out = self.check(
            "signal: traffic on the server",
            &format!("f=/sys/class/net/{dev}/statistics/rx_bytes; a=$(cat $f); sleep {secs}; b=$(cat $f); echo $((b - a))"),
        )?;
        Ok(out.trim().parse().unwrap_or(0))
    }
}
