//! Packaging: the Dockerfile, its build script, the docker context and the golden image recipe.
//!
//! No container engine runs here, so the Dockerfile is checked structurally (the instructions a
//! user relies on: non-root UID, writable /data, entrypoint, labels, version metadata wiring) and
//! the scripts it and the golden-image recipe run are executed for real against stub `cargo`,
//! `image-builder` and `podman` executables that record what they were asked to do. With
//! `RUN_RELEASE_BUILD=1` the release build really runs and the binary's `version` output is
//! checked. shellcheck runs when installed (required with `VIRTWORK_REQUIRE_GUEST_TOOLS=1`).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

fn cargo_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = fs::metadata(path).unwrap().permissions();
    perms.set_mode(0o755);
    fs::set_permissions(path, perms).unwrap();
}

fn write_script(path: &Path, body: &str) {
    fs::write(path, body).unwrap();
    make_executable(path);
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Dockerfile

/// One Dockerfile instruction: keyword (upper case) and its arguments, continuation lines joined.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    args: String,
}

fn dockerfile() -> Vec<Instruction> {
    let text = read("Dockerfile");
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (current.is_empty() && trimmed.is_empty()) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (keyword, args) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.split_whitespace().collect::<Vec<_>>().join(" "),
        });
        current.clear();
    }
    out
}

/// The instructions of the final (runtime) stage.
fn runtime_stage(all: &[Instruction]) -> &[Instruction] {
    let last_from = all
        .iter()
        .rposition(|i| i.keyword == "FROM")
        .expect("a FROM");
    &all[last_from..]
}

fn arg_default<'a>(stage: &'a [Instruction], name: &str) -> Option<&'a str> {
    stage.iter().filter(|i| i.keyword == "ARG").find_map(|i| {
        let (key, value) = i.args.split_once('=').unwrap_or((&i.args, ""));
        (key == name).then_some(value)
    })
}

#[test]
fn dockerfile_builds_with_the_release_script_and_embeds_version_metadata() {
    let all = dockerfile();
    let first_from = all.iter().position(|i| i.keyword == "FROM").unwrap();
    let rust_image = arg_default(&all[..first_from], "RUST_IMAGE").expect("ARG RUST_IMAGE");
    assert!(
        rust_image.contains(&format!("rust:{}", env!("CARGO_PKG_RUST_VERSION"))),
        "build image {rust_image} must match Cargo.toml rust-version {}",
        env!("CARGO_PKG_RUST_VERSION")
    );
    let runtime = arg_default(&all[..first_from], "RUNTIME_IMAGE").expect("ARG RUNTIME_IMAGE");
    assert!(runtime.contains("ubi9/ubi-minimal"), "{runtime}");

    let build_from = all.iter().position(|i| i.keyword == "FROM").unwrap();
    let runtime_from = all.iter().rposition(|i| i.keyword == "FROM").unwrap();
    assert!(build_from < runtime_from, "multi-stage");
    assert_eq!(all[build_from].args, "${RUST_IMAGE} AS build");
    let build = &all[build_from..runtime_from];
    for name in ["VIRTWORK_GIT_COMMIT", "VIRTWORK_BUILD_DATE"] {
        assert!(arg_default(build, name).is_some(), "build stage ARG {name}");
    }
    let run = build
        .iter()
        .find(|i| i.keyword == "RUN" && i.args.contains("build/build-release.sh"))
        .expect("the build stage RUNs build/build-release.sh");
    assert!(run.args.contains("--out /out"), "{}", run.args);
    assert!(
        run.args
            .contains("VIRTWORK_GIT_COMMIT=\"${VIRTWORK_GIT_COMMIT}\"")
            && run
                .args
                .contains("VIRTWORK_BUILD_DATE=\"${VIRTWORK_BUILD_DATE}\""),
        "build ARGs reach the script: {}",
        run.args
    );
    // The image version label follows Cargo.toml.
    assert_eq!(
        arg_default(runtime_stage(&all), "VERSION"),
        Some(cargo_version().as_str())
    );
}

#[test]
fn runtime_image_is_non_root_with_writable_data_and_the_entrypoint() {
    let all = dockerfile();
    let stage = runtime_stage(&all);
    let find = |keyword: &str, needle: &str| {
        stage
            .iter()
            .position(|i| i.keyword == keyword && i.args.contains(needle))
            .unwrap_or_else(|| panic!("runtime stage lacks {keyword} …{needle}…"))
    };
    let data = find("RUN", "mkdir -p /data");
    assert!(stage[data].args.contains("chown 1001:0 /data"));
    assert!(stage[data].args.contains("chmod g=u /data"));
    find("COPY", "--from=build /out/virtwork /usr/local/bin/virtwork");
    find("COPY", "entrypoint.sh /usr/local/bin/entrypoint.sh");
    let user = find("USER", "1001");
    assert_eq!(stage[user].args, "1001");
    // Nothing after USER runs as root, and no later USER switches back.
    assert!(
        stage[user..]
            .iter()
            .all(|i| i.keyword != "RUN" && i.keyword != "USER" || i.args == "1001"),
        "USER 1001 must be the last USER and follow every RUN"
    );
    let env = find("ENV", "VIRTWORK_AUDIT_DB=/data/virtwork.db");
    assert!(stage[env].args.contains("HOME=/data"));
    assert_eq!(
        stage
            .iter()
            .rfind(|i| i.keyword == "ENTRYPOINT")
            .unwrap()
            .args,
        "[\"/usr/local/bin/entrypoint.sh\"]"
    );
    let labels: String = stage
        .iter()
        .filter(|i| i.keyword == "LABEL")
        .map(|i| i.args.as_str())
        .collect();
    for label in [
        "io.k8s.display-name=",
        "io.k8s.description=",
        "io.openshift.tags=",
        "org.opencontainers.image.title=",
        "org.opencontainers.image.description=",
        "org.opencontainers.image.version=\"${VERSION}\"",
        "org.opencontainers.image.revision=\"${VIRTWORK_GIT_COMMIT}\"",
        "org.opencontainers.image.created=\"${VIRTWORK_BUILD_DATE}\"",
        "org.opencontainers.image.source=",
        "org.opencontainers.image.licenses=\"Apache-2.0\"",
    ] {
        assert!(labels.contains(label), "missing label {label}");
    }
}

/// Whether `.dockerignore` lets `path` into the build context. Supports the forms the file
/// uses (`*`, `!file`, `!dir/`); anything fancier fails loudly so this check is extended.
fn in_docker_context(path: &str) -> bool {
    let mut included = true;
    for line in read(".dockerignore").lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (negate, pattern) = match line.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, line),
        };
        let matches = if pattern == "*" {
            true
        } else {
            assert!(
                !pattern.contains(['*', '?', '[']),
                "unsupported .dockerignore pattern {line}: extend tests/packaging.rs"
            );
            match pattern.strip_suffix('/') {
                Some(dir) => path.starts_with(&format!("{dir}/")),
                None => path == pattern,
            }
        };
        if matches {
            included = negate;
        }
    }
    included
}

#[test]
fn docker_context_holds_everything_the_build_needs_and_no_local_state() {
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "src/main.rs",
        "src/lib.rs",
        "build/build-release.sh",
        "entrypoint.sh",
    ] {
        assert!(
            in_docker_context(needed),
            "{needed} must be in the docker context"
        );
    }
    for excluded in [
        "target/debug/virtwork",
        "virtwork.db",
        ".git/HEAD",
        "docs/architecture.md",
    ] {
        assert!(
            !in_docker_context(excluded),
            "{excluded} must not be in the docker context"
        );
    }
    // Files the crate pulls in at compile time from outside src/ (include_str!/include_bytes!)
    // and explicitly declared target paths must be in the context too.
    let mut needed: BTreeSet<String> = BTreeSet::new();
    // Cargo refuses to load a manifest whose declared targets are missing, even when building
    // only the binary: `[[bench]] name = "plan"` needs benches/plan.rs.
    let mut table = String::new();
    for line in read("Cargo.toml").lines() {
        let line = line.trim();
        if line.starts_with('[') {
            table = line.to_string();
        } else if let Some(rest) = line.strip_prefix("path = \"") {
            needed.insert(rest.trim_end_matches('"').to_string());
        } else if let Some(rest) = line.strip_prefix("name = \"") {
            let name = rest.trim_end_matches('"');
            let dir = match table.as_str() {
                "[[bench]]" => "benches",
                "[[test]]" => "tests",
                "[[example]]" => "examples",
                _ => continue,
            };
            needed.insert(format!("{dir}/{name}.rs"));
        }
    }
    collect_includes(&repo().join("src"), &mut needed);
    for path in needed {
        assert!(
            in_docker_context(&path),
            "{path} is compiled in but excluded by .dockerignore"
        );
    }
}

fn collect_includes(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_includes(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).unwrap();
            for macro_name in ["include_str!(\"", "include_bytes!(\""] {
                for piece in text.split(macro_name).skip(1) {
                    let rel = piece.split('"').next().unwrap();
                    let target = path.parent().unwrap().join(rel);
                    if let Ok(real) = target.canonicalize()
                        && let Ok(inside) = real.strip_prefix(repo().canonicalize().unwrap())
                    {
                        out.insert(inside.to_string_lossy().into_owned());
                    }
                }
            }
        }
    }
}

/// UBI 9 ships glibc 2.34; the binary (built on bookworm, glibc 2.36) must not need newer
/// symbol versions or it will not start in the runtime image.
#[test]
fn binary_needs_no_glibc_newer_than_ubi9s() {
    let Ok(out) = Command::new("objdump")
        .arg("-T")
        .arg(env!("CARGO_BIN_EXE_virtwork"))
        .output()
    else {
        eprintln!("SKIP: objdump (binutils) not installed");
        return;
    };
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut newest = (0u32, 0u32);
    for piece in text.split("GLIBC_").skip(1) {
        let version: String = piece
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let v = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        newest = newest.max(v);
    }
    assert!(
        newest >= (2, 2),
        "no glibc symbol versions found — is the binary dynamic?"
    );
    assert!(
        newest <= (2, 34),
        "the binary needs GLIBC_{}.{}, UBI 9 has 2.34",
        newest.0,
        newest.1
    );
}

// ---------------------------------------------------------------------------------------------
// build/build-release.sh

const STUB_CARGO: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$STUB_DIR/cargo-argv"
{
    printf 'commit=%s\n' "$VIRTWORK_GIT_COMMIT"
    printf 'date=%s\n' "$VIRTWORK_BUILD_DATE"
    printf 'target=%s\n' "$CARGO_TARGET_DIR"
    printf 'cwd=%s\n' "$(pwd)"
} > "$STUB_DIR/cargo-env"
[ "${STUB_CARGO_EXIT:-0}" -eq 0 ] || exit "$STUB_CARGO_EXIT"
mkdir -p "$CARGO_TARGET_DIR/release"
printf '#!/bin/sh\necho built\n' > "$CARGO_TARGET_DIR/release/virtwork"
chmod +x "$CARGO_TARGET_DIR/release/virtwork"
"#;

struct ReleaseSandbox {
    dir: tempfile::TempDir,
}

impl ReleaseSandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        write_script(&dir.path().join("cargo"), STUB_CARGO);
        ReleaseSandbox { dir }
    }

    fn run(&self, env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(repo().join("build/build-release.sh"));
        cmd.arg("--out")
            .arg(self.dir.path().join("out"))
            .env_remove("VIRTWORK_GIT_COMMIT")
            .env_remove("VIRTWORK_BUILD_DATE")
            .env_remove("SOURCE_DATE_EPOCH")
            .env("CARGO", self.dir.path().join("cargo"))
            .env("CARGO_TARGET_DIR", self.dir.path().join("target"))
            .env("STUB_DIR", self.dir.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn file(&self, name: &str) -> Option<String> {
        fs::read_to_string(self.dir.path().join(name)).ok()
    }
}

#[test]
fn release_script_passes_metadata_to_cargo_and_installs_the_binary() {
    let sandbox = ReleaseSandbox::new();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let out = sandbox.run(&[
        ("VIRTWORK_GIT_COMMIT", commit),
        ("VIRTWORK_BUILD_DATE", "2026-01-31T12:34:56Z"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        sandbox.file("cargo-argv").unwrap(),
        "build\n--release\n--locked\n--bin\nvirtwork\n"
    );
    let env = sandbox.file("cargo-env").unwrap();
    assert!(env.contains(&format!("commit={commit}\n")), "{env}");
    assert!(env.contains("date=2026-01-31T12:34:56Z\n"), "{env}");
    let target = sandbox.dir.path().join("target");
    assert!(
        env.contains(&format!("target={}\n", target.display())),
        "{env}"
    );
    let cwd = repo().canonicalize().unwrap();
    assert!(env.contains(&format!("cwd={}\n", cwd.display())), "{env}");
    let installed = sandbox.dir.path().join("out/virtwork");
    let run = Command::new(&installed)
        .output()
        .expect("installed binary runs");
    assert_eq!(run.stdout, b"built\n");
}

#[test]
fn release_script_leaves_unset_metadata_to_build_rs_and_honours_source_date_epoch() {
    let sandbox = ReleaseSandbox::new();
    let out = sandbox.run(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let env = sandbox.file("cargo-env").unwrap();
    // Empty: build.rs then asks git itself (or reports "(unknown)").
    assert!(
        env.contains("commit=\n") && env.contains("date=\n"),
        "{env}"
    );

    let sandbox = ReleaseSandbox::new();
    let out = sandbox.run(&[("SOURCE_DATE_EPOCH", "86400")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let env = sandbox.file("cargo-env").unwrap();
    assert!(env.contains("date=1970-01-02T00:00:00Z\n"), "{env}");
}

#[test]
fn release_script_rejects_bad_metadata_before_building() {
    for (key, value, needle) in [
        (
            "VIRTWORK_GIT_COMMIT",
            "HEAD; rm -rf /",
            "VIRTWORK_GIT_COMMIT",
        ),
        ("VIRTWORK_GIT_COMMIT", "ABCDEF0", "VIRTWORK_GIT_COMMIT"),
        ("VIRTWORK_BUILD_DATE", "2026-01-31", "VIRTWORK_BUILD_DATE"),
        (
            "VIRTWORK_BUILD_DATE",
            "2026-01-31T12:00:00+02:00",
            "VIRTWORK_BUILD_DATE",
        ),
        ("SOURCE_DATE_EPOCH", "yesterday", "SOURCE_DATE_EPOCH"),
    ] {
        let sandbox = ReleaseSandbox::new();
        let out = sandbox.run(&[(key, value)]);
        assert_eq!(out.status.code(), Some(2), "{key}={value}");
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
        assert_eq!(
            sandbox.file("cargo-argv"),
            None,
            "cargo ran for {key}={value}"
        );
    }
    let sandbox = ReleaseSandbox::new();
    let out = Command::new(repo().join("build/build-release.sh"))
        .arg("--bogus")
        .env("CARGO", sandbox.dir.path().join("cargo"))
        .env("STUB_DIR", sandbox.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--bogus"));
}

#[test]
fn release_script_propagates_cargo_failure() {
    let sandbox = ReleaseSandbox::new();
    let out = sandbox.run(&[("STUB_CARGO_EXIT", "101")]);
    assert_eq!(out.status.code(), Some(101));
    assert!(!sandbox.dir.path().join("out/virtwork").exists());
}

/// The real thing: `cargo build --release` through the script, then `virtwork version`.
/// Slow (a full release build), so only with RUN_RELEASE_BUILD=1.
#[test]
fn release_build_embeds_commit_and_date() {
    if std::env::var("RUN_RELEASE_BUILD").as_deref() != Ok("1") {
        eprintln!("SKIP: set RUN_RELEASE_BUILD=1 to run the release build");
        return;
    }
    let out_dir = tempfile::tempdir().unwrap();
    let commit = "feedfacecafe0123456789abcdef0123456789ab";
    let out = Command::new(repo().join("build/build-release.sh"))
        .arg("--out")
        .arg(out_dir.path())
        .env_remove("CARGO_TARGET_DIR")
        .env("VIRTWORK_GIT_COMMIT", commit)
        .env("VIRTWORK_BUILD_DATE", "2026-02-03T04:05:06Z")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let version = Command::new(out_dir.path().join("virtwork"))
        .arg("version")
        .output()
        .unwrap();
    assert!(version.status.success(), "{}", stderr(&version));
    let text = String::from_utf8_lossy(&version.stdout);
    assert!(text.contains(&cargo_version()), "{text}");
    assert!(text.contains(commit), "{text}");
    assert!(text.contains("2026-02-03T04:05:06Z"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// build/golden-image

fn shellcheck(rel: &str) {
    let required = std::env::var("VIRTWORK_REQUIRE_GUEST_TOOLS").as_deref() == Ok("1");
    if Command::new("shellcheck")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            !required,
            "shellcheck is required (VIRTWORK_REQUIRE_GUEST_TOOLS=1) but absent"
        );
        eprintln!("SKIP: shellcheck not installed");
        return;
    }
    let out = Command::new("shellcheck")
        .arg("--severity=style")
        .arg(repo().join(rel))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{rel}:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn build_scripts_pass_shellcheck() {
    shellcheck("build/build-release.sh");
    shellcheck("build/golden-image/build.sh");
}

/// Package names listed in blueprint.toml's `[[packages]]` tables.
fn blueprint_packages() -> BTreeSet<String> {
    let mut packages = BTreeSet::new();
    let mut in_packages = false;
    for line in read("build/golden-image/blueprint.toml").lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_packages = line == "[[packages]]";
        } else if in_packages && let Some(rest) = line.strip_prefix("name = \"") {
            packages.insert(rest.trim_end_matches('"').to_string());
        }
    }
    packages
}

/// Every package the built-in workloads and the shipped catalog entries install at boot: the
/// `packages` of every role's rendered cloud-config, plus packages a `runcmd` installs with dnf
/// (chaos-network's `kernel-modules-extra-$(uname -r)` becomes `kernel-modules-extra`).
fn workload_packages() -> BTreeSet<String> {
    use virtwork::model::SshAccess;
    use virtwork::workloads::{Registry, WorkloadOptions, WorkloadSettings};

    let catalog_dir = repo().join("catalog");
    let mut entries: Vec<String> = fs::read_dir(&catalog_dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "the repository ships catalog entries");
    let registry = Registry::with_catalog(&catalog_dir, &entries).expect("catalog loads");
    let settings = WorkloadSettings {
        vm_count: 1,
        cpu_cores: 2,
        memory: "2Gi".parse().unwrap(),
        params: Default::default(),
        guest_family: Default::default(),
    };
    let options = WorkloadOptions {
        namespace: "virtwork".parse().unwrap(),
        data_disk_size: "10Gi".parse().unwrap(),
        ssh: SshAccess::default(),
        catalog_dir: catalog_dir.clone(),
        planned_workloads: Vec::new(),
        ready_endpoint: false,
        run_tag: String::new(),
    };
    let mut packages = BTreeSet::new();
    let names: Vec<String> = registry.names().iter().map(|n| n.to_string()).collect();
    assert!(names.len() >= 9 + entries.len(), "{names:?}");
    for name in &names {
        let workload = registry.create(name, &settings, &options).expect(name);
        for role in workload.roles() {
            let userdata = workload.userdata(role.role.as_deref()).unwrap();
            let doc: serde_yaml::Value = serde_yaml::from_str(&userdata).unwrap();
            for p in doc
                .get("packages")
                .and_then(|p| p.as_sequence())
                .into_iter()
                .flatten()
            {
                packages.insert(p.as_str().unwrap().to_string());
            }
            let runcmd = doc.get("runcmd").and_then(|r| r.as_sequence());
            for cmd in runcmd.into_iter().flatten() {
                let line = match cmd {
                    serde_yaml::Value::Sequence(argv) => argv
                        .iter()
                        .filter_map(|a| a.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                    other => other.as_str().unwrap_or_default().to_string(),
                };
                if let Some(rest) = line.split("dnf install").nth(1) {
                    for word in rest.split_whitespace().filter(|w| !w.starts_with('-')) {
                        let word = word.trim_matches(|c| c == '"' || c == '\'');
                        let package = word.split("-$(").next().unwrap();
                        packages.insert(package.to_string());
                    }
                }
            }
        }
    }
    packages
}

#[test]
fn golden_image_blueprint_preinstalls_every_workload_package() {
    let blueprint = blueprint_packages();
    let needed = workload_packages();
    eprintln!("workload packages: {needed:?}");
    // A sanity floor so a rendering change cannot make this check vacuous.
    for known in [
        "stress-ng",
        "fio",
        "iperf3",
        "postgresql-server",
        "sysbench",
        "redis",
    ] {
        assert!(
            needed.contains(known),
            "workloads no longer install {known}? {needed:?}"
        );
    }
    assert!(
        needed.contains("kernel-modules-extra"),
        "runcmd dnf installs are found: {needed:?}"
    );
    let missing: Vec<&String> = needed.difference(&blueprint).collect();
    assert!(
        missing.is_empty(),
        "blueprint.toml lacks workload packages {missing:?}"
    );
    // Guest plumbing and what the data-disk setup needs from the image (mkfs.xfs).
    for base in ["cloud-init", "qemu-guest-agent", "xfsprogs"] {
        assert!(blueprint.contains(base), "blueprint.toml lacks {base}");
    }
}

const STUB_IMAGE_BUILDER: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$STUB_DIR/image-builder-argv"
out=''
while [ "$#" -gt 0 ]; do
    if [ "$1" = --output-dir ]; then out=$2; fi
    shift
done
mkdir -p "$out/fedora-42-qcow2-x86_64"
i=0
while [ "$i" -lt "${STUB_QCOW2S:-1}" ]; do
    printf 'disk %s' "$i" > "$out/fedora-42-qcow2-x86_64/image-$i.qcow2"
    i=$((i + 1))
done
printf 'manifest' > "$out/fedora-42-qcow2-x86_64/manifest.json"
"#;

const STUB_ENGINE: &str = r#"#!/bin/sh
printf '%s\n' "$*" >> "$STUB_DIR/engine-calls"
if [ "$1" = build ]; then
    eval "context=\${$#}"
    (cd "$context" && ls -A) > "$STUB_DIR/context-files"
    cat "$context/disk.qcow2" > "$STUB_DIR/context-disk"
fi
"#;

struct GoldenSandbox {
    dir: tempfile::TempDir,
}

impl GoldenSandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        write_script(&bin.join("image-builder"), STUB_IMAGE_BUILDER);
        write_script(&bin.join("fake-podman"), STUB_ENGINE);
        GoldenSandbox { dir }
    }

    fn run(&self, env: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(repo().join("build/golden-image/build.sh"));
        cmd.env("PATH", path)
            .env("ENGINE", "fake-podman")
            .env("STUB_DIR", self.dir.path())
            .env("TMPDIR", self.dir.path());
        for var in [
            "REGISTRY",
            "IMAGE_NAME",
            "TAG",
            "DISTRO",
            "IMAGE_TYPE",
            "PUSH",
        ] {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn file(&self, name: &str) -> Option<String> {
        fs::read_to_string(self.dir.path().join(name)).ok()
    }
}

/// build.sh re-executes itself with sudo when not root; the stubs only make sense as root.
fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    let root = String::from_utf8_lossy(&out.stdout).trim() == "0";
    if !root {
        eprintln!("SKIP: golden-image build.sh tests need root (the script sudo-execs otherwise)");
    }
    root
}

#[test]
fn golden_build_stages_exactly_one_qcow2_and_tags_the_image() {
    if !running_as_root() {
        return;
    }
    let sandbox = GoldenSandbox::new();
    let out = sandbox.run(&[("REGISTRY", "registry.example/team"), ("TAG", "v7")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let argv = sandbox.file("image-builder-argv").unwrap();
    assert!(
        argv.starts_with("build\nqcow2\n--distro\nfedora-42\n--blueprint\n"),
        "{argv}"
    );
    assert!(argv.contains("build/golden-image/blueprint.toml"), "{argv}");
    assert_eq!(
        sandbox.file("context-files").unwrap(),
        "Containerfile\ndisk.qcow2\n"
    );
    assert_eq!(sandbox.file("context-disk").unwrap(), "disk 0");
    let calls = sandbox.file("engine-calls").unwrap();
    assert_eq!(
        calls.lines().count(),
        1,
        "no push unless PUSH=true: {calls}"
    );
    assert!(calls.starts_with("build --tag registry.example/team/virtwork-disk:v7 --file "));

    let sandbox = GoldenSandbox::new();
    let out = sandbox.run(&[("PUSH", "true")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let calls = sandbox.file("engine-calls").unwrap();
    assert_eq!(
        calls.lines().last(),
        Some("push quay.io/opdev/virtwork-disk:latest")
    );
}

#[test]
fn golden_build_refuses_zero_or_several_qcow2_files() {
    if !running_as_root() {
        return;
    }
    for (count, needle) in [("0", "no .qcow2"), ("2", "2 .qcow2 files")] {
        let sandbox = GoldenSandbox::new();
        let out = sandbox.run(&[("STUB_QCOW2S", count)]);
        assert_eq!(out.status.code(), Some(1), "{count} qcow2");
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
        assert_eq!(sandbox.file("engine-calls"), None, "nothing built");
    }
}

#[test]
fn golden_build_rejects_bad_settings() {
    let sandbox = GoldenSandbox::new();
    let out = sandbox.run(&[("PUSH", "yes")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("PUSH='yes'"), "{}", stderr(&out));
    let out = sandbox.run(&[("ENGINE", "no-such-engine")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-engine"), "{}", stderr(&out));
    assert_eq!(sandbox.file("image-builder-argv"), None);
}

#[test]
fn golden_containerfile_copies_the_staged_disk_for_qemu() {
    let text = read("build/golden-image/Containerfile");
    assert!(text.lines().any(|l| l.trim() == "FROM scratch"));
    assert!(
        text.lines()
            .any(|l| l.trim() == "COPY --chown=107:107 disk.qcow2 /disk/disk.qcow2"),
        "{text}"
    );
}
