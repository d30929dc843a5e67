//! Generated names as a run makes them: every VM, Secret, DataVolume and built-in Service
//! name carries the run's tag (the first 6 hex digits of its run id), so tests spell the
//! untagged name and let [`tagged`] put the tag where `virtwork run` does.

/// The tag of `run_id` (`0b6c4a8e-...` → `0b6c4a`).
pub fn tag_of(run_id: &str) -> String {
    run_id.chars().filter(|c| *c != '-').take(6).collect()
}

/// `name` as a run with `run_id` names it: `virtwork-cpu-0` → `virtwork-cpu-<tag>-0`,
/// `virtwork-network-server-0` → `virtwork-network-<tag>-server-0`, `<vm>-cloudinit` and
/// `<disk>-<vm>` follow their VM, a Service `virtwork-iperf3-server` →
/// `virtwork-iperf3-server-<tag>`.
pub fn tagged(name: &str, run_id: &str) -> String {
    let tag = tag_of(run_id);
    if let Some(vm) = name.strip_suffix("-cloudinit") {
        return format!("{}-cloudinit", tagged(vm, run_id));
    }
    if let Some((disk, vm)) = name.split_once("-virtwork-") {
        return format!("{disk}-{}", tagged(&format!("virtwork-{vm}"), run_id));
    }
    let Some((rest, index)) = name.rsplit_once('-') else {
        return name.to_string();
    };
    if !index.chars().all(|c| c.is_ascii_digit()) {
        return format!("{name}-{tag}");
    }
    match rest.rsplit_once('-') {
        Some((workload, role)) if role == "server" || role == "client" => {
            format!("{workload}-{tag}-{role}-{index}")
        }
        _ => format!("{rest}-{tag}-{index}"),
    }
}

#[test]
fn names_take_the_tag_where_run_puts_it() {
    let id = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f";
    assert_eq!(tagged("virtwork-cpu-0", id), "virtwork-cpu-0b6c4a-0");
    assert_eq!(
        tagged("virtwork-network-server-1", id),
        "virtwork-network-0b6c4a-server-1"
    );
    assert_eq!(
        tagged("virtwork-disk-data-virtwork-disk-0", id),
        "virtwork-disk-data-virtwork-disk-0b6c4a-0"
    );
    assert_eq!(
        tagged("virtwork-tps-client-0-cloudinit", id),
        "virtwork-tps-0b6c4a-client-0-cloudinit"
    );
    assert_eq!(
        tagged("virtwork-iperf3-server", id),
        "virtwork-iperf3-server-0b6c4a"
    );
}
