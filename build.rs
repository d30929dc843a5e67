//! Embeds the commit and build date shown by `virtwork version`.
//!
//! `VIRTWORK_GIT_COMMIT` / `VIRTWORK_BUILD_DATE` win when set (release builds, containers);
//! otherwise git supplies the short commit and its commit date, and `(unknown)` stands in when
//! neither is available. The script reruns only when those variables or git's HEAD change, so
//! ordinary edits never re-run it.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .env("TZ", "UTC")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn from_env(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = from_env("VIRTWORK_GIT_COMMIT").or_else(|| git(&["rev-parse", "--short", "HEAD"]));
    let date = from_env("VIRTWORK_BUILD_DATE").or_else(|| {
        git(&[
            "log",
            "-1",
            "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
            "--format=%cd",
        ])
    });
    // Rerun when a commit moves HEAD (or the branch it points to), not on every file change.
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let unknown = || "(unknown)".to_string();
    println!(
        "cargo:rustc-env=VIRTWORK_COMMIT={}",
        commit.unwrap_or_else(unknown)
    );
    println!(
        "cargo:rustc-env=VIRTWORK_DATE={}",
        date.unwrap_or_else(unknown)
    );
}
