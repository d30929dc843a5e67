//! Runs the fake Kubernetes API server standalone so people and benchmarks can point the
//! real `virtwork` binary (or kubectl) at it. Prints the URL, writes a kubeconfig, and
//! serves until interrupted.
//!
//! `cargo run --example fake_apiserver -- [--kubeconfig PATH] [--tls] [--token T]
//!  [--no-kubevirt] [--latency-ms N] [--error-rate F] [--seed N] [--vmi-delay-ms N]
//!  [--oversized-lists-mb N]` (`--oversized-lists-mb`: every LIST is answered with a body of
//!  N MB, for measuring what a hostile server costs the client)

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use support::{FakeApiServer, Options};

fn main() {
    let mut options = Options::default();
    let mut kubeconfig = std::path::PathBuf::from("fake-apiserver.kubeconfig");
    let mut args = std::env::args().skip(1);
    let usage = "usage: fake_apiserver [--kubeconfig PATH] [--tls] [--token T] [--no-kubevirt] \
                 [--latency-ms N] [--error-rate F] [--seed N] [--vmi-delay-ms N] \
                 [--oversized-lists-mb N]";
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("{name} needs a value; {usage}");
                std::process::exit(2)
            })
        };
        let number = |name: &str, v: String| -> u64 {
            v.parse().unwrap_or_else(|_| {
                eprintln!("{name} expects a non-negative integer, got {v:?}; {usage}");
                std::process::exit(2)
            })
        };
        match arg.as_str() {
            "--kubeconfig" => kubeconfig = value("--kubeconfig").into(),
            "--tls" => options.tls = true,
            "--token" => options.token = Some(value("--token")),
            "--no-kubevirt" => options.virtualization_installed = false,
            "--latency-ms" => {
                let v = value("--latency-ms");
                options.faults.latency = Duration::from_millis(number("--latency-ms", v));
            }
            "--error-rate" => {
                let v = value("--error-rate");
                options.faults.error_rate = v
                    .parse()
                    .ok()
                    .filter(|f: &f64| (0.0..=1.0).contains(f))
                    .unwrap_or_else(|| {
                        eprintln!(
                            "--error-rate expects a fraction between 0 and 1, got {v:?}; {usage}"
                        );
                        std::process::exit(2)
                    });
            }
            "--seed" => {
                let v = value("--seed");
                options.faults.seed = number("--seed", v);
            }
            "--vmi-delay-ms" => {
                let v = value("--vmi-delay-ms");
                let d = Duration::from_millis(number("--vmi-delay-ms", v));
                options.controllers.pending_delay = d;
                options.controllers.scheduling_delay = d;
                options.controllers.scheduled_delay = d;
                options.controllers.datavolume_delay = d;
            }
            "--oversized-lists-mb" => {
                let v = value("--oversized-lists-mb");
                let bytes = number("--oversized-lists-mb", v) as usize * 1_000_000;
                options.faults.scripted.push(support::ScriptedFault {
                    verb: Some("list".into()),
                    resource: None,
                    name: None,
                    times: u32::MAX,
                    action: support::FaultAction::Oversized(bytes),
                });
            }
            "-h" | "--help" => {
                println!("{usage}");
                return;
            }
            other => {
                eprintln!("unknown argument {other:?}; {usage}");
                std::process::exit(2);
            }
        }
    }
    let server = FakeApiServer::start(options);
    if let Err(e) = server.write_kubeconfig(&kubeconfig) {
        eprintln!("cannot write kubeconfig {}: {e}", kubeconfig.display());
        std::process::exit(1);
    }
    println!("fake apiserver listening on {}", server.url());
    println!("kubeconfig written to {}", kubeconfig.display());
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
