//! Planning and rendering throughput: how long `build_plan` plus the dry-run YAML / JSON
//! rendering take for 1,000 VMs. Plain `Instant` loop (no criterion: not worth its build
//! cost for two numbers); prints min and median per phase, total and per VM. No assertions —
//! the figures go to docs/performance.md.
//!
//! Run: `cargo bench --bench plan` (env `BENCH_ITERATIONS`, default 20; under
//! `cargo test --all-targets` it runs one iteration as a smoke test).

#[path = "../tests/support/test_config.rs"]
mod test_config;

use std::hint::black_box;
use std::time::{Duration, Instant};

use virtwork::plan::{PlanInput, build_plan};
use virtwork::render::{dry_run_yaml, plan_json};
use virtwork::workloads::Registry;

fn config(workloads: &[&str], vm_count: u32) -> PlanInput {
    // SSH on, for a realistic user-data size (users block with key and hashed password).
    test_config::with_ssh(test_config::plan_input(workloads, vm_count))
}

struct Samples(Vec<Duration>);

impl Samples {
    fn min(&self) -> Duration {
        *self.0.iter().min().unwrap()
    }
    fn median(&self) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        sorted[sorted.len() / 2]
    }
}

fn report(phase: &str, samples: &Samples, vms: usize) {
    let per_vm = |d: Duration| d.as_nanos() / vms as u128;
    println!(
        "  {phase:<18} median {:>9.3} ms ({:>7} ns/VM)   min {:>9.3} ms ({:>7} ns/VM)",
        samples.median().as_secs_f64() * 1e3,
        per_vm(samples.median()),
        samples.min().as_secs_f64() * 1e3,
        per_vm(samples.min()),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // where one iteration is enough to prove the benchmark still works.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let iterations: usize = match std::env::var("BENCH_ITERATIONS").ok() {
        Some(v) => v.parse().expect("BENCH_ITERATIONS must be a number"),
        None if benchmarking => 20,
        None => 1,
    };
    let registry = Registry::builtin();
    let scenarios = [
        ("cpu, vm-count 1000", config(&["cpu"], 1000)),
        (
            "all nine built-ins, vm-count 91 (1001 VMs)",
            config(&test_config::ALL_BUILTINS, 91),
        ),
    ];
    println!("planning and rendering, {iterations} iterations each (after 1 warm-up)");
    for (label, cfg) in &scenarios {
        let mut plan_t = Samples(Vec::new());
        let mut yaml_t = Samples(Vec::new());
        let mut json_t = Samples(Vec::new());
        let mut total_t = Samples(Vec::new());
        let mut vms = 0;
        let mut yaml_bytes = 0;
        for i in 0..=iterations {
            let start = Instant::now();
            let plan =
                build_plan(cfg, &registry, test_config::RUN_ID.parse().unwrap()).expect("plan");
            let planned = start.elapsed();
            let yaml = dry_run_yaml(&plan).expect("yaml");
            let rendered = start.elapsed();
            let json = serde_json::to_string(&plan_json(&plan, "client").expect("json"))
                .expect("json text");
            let done = start.elapsed();
            vms = plan.vms.len();
            yaml_bytes = yaml.len();
            black_box((&yaml, &json));
            if i == 0 {
                continue; // warm-up
            }
            plan_t.0.push(planned);
            yaml_t.0.push(rendered - planned);
            json_t.0.push(done - rendered);
            total_t.0.push(planned + (rendered - planned));
        }
        println!(
            "{label}: {vms} VMs, YAML stream {:.1} MiB",
            yaml_bytes as f64 / 1048576.0
        );
        report("build_plan", &plan_t, vms);
        report("render YAML", &yaml_t, vms);
        report("render JSON", &json_t, vms);
        report("plan + YAML", &total_t, vms);
    }
}
