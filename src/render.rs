//! Renders a [`Plan`] for `virtwork run --dry-run`: a multi-document YAML stream that
//! `kubectl`/`oc apply -f -` accepts, or (with `--output json`) one JSON document whose
//! schema is documented in docs/output-json.md.
//!
//! No I/O of its own: [`write_dry_run_yaml`] writes to the writer it is given, one document
//! at a time (logs go to stderr, so nothing interleaves with the product on stdout). Order is fixed: the Namespace,
//! Services (sorted by name), then Secrets, then VirtualMachines, both in plan order.

use std::io::Write;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::plan::Plan;

/// Version of the `--output json` plan document; bumped only on incompatible changes.
pub const PLAN_JSON_FORMAT_VERSION: u32 = 1;

/// The plan as a YAML stream: each document is preceded by a `# <Kind>: <name> (workload:
/// <workload>)` comment and documents are separated by `---` lines.
pub fn dry_run_yaml(plan: &Plan) -> Result<String> {
    let mut out = Vec::new();
    write_dry_run_yaml(plan, &mut out).map_err(|e| match e {
        RenderError::Render(e) => e,
        RenderError::Write(e) => Error::runtime(format!("rendering the plan: {e}")),
    })?;
    String::from_utf8(out).map_err(|e| Error::runtime(format!("rendering the plan: {e}")))
}

/// Why writing a rendered plan stopped: an object that does not render, or the writer.
#[derive(Debug)]
pub enum RenderError {
    Render(Error),
    Write(std::io::Error),
}

/// [`dry_run_yaml`] written document by document to `out`: each object is built and
/// rendered when it is written, so a fleet of any size costs the memory of one document.
pub fn write_dry_run_yaml<W: Write>(
    plan: &Plan,
    out: &mut W,
) -> std::result::Result<(), RenderError> {
    let mut first = true;
    let mut emit = |text: String| -> std::result::Result<(), RenderError> {
        if !std::mem::take(&mut first) {
            out.write_all(b"---\n").map_err(RenderError::Write)?;
        }
        out.write_all(text.as_bytes()).map_err(RenderError::Write)
    };
    let namespace = serde_yaml::to_string(&namespace_document(&plan.namespace)).map_err(|err| {
        RenderError::Render(Error::runtime(format!(
            "rendering Namespace {:?} as YAML: {err}",
            plan.namespace
        )))
    })?;
    emit(format!(
        "# Namespace: {} (for kubectl apply on a cluster without it)\n{namespace}",
        plan.namespace
    ))?;
    for planned in &plan.services {
        emit(
            document(
                "Service",
                planned.service.metadata.name.as_deref(),
                &planned.workload,
                &planned.service,
            )
            .map_err(RenderError::Render)?,
        )?;
    }
    for vm in &plan.vms {
        let name = vm.secret_name();
        emit(
            document("Secret", Some(&name), &vm.workload, &vm.secret())
                .map_err(RenderError::Render)?,
        )?;
    }
    for vm in &plan.vms {
        emit(
            document("VirtualMachine", Some(&vm.name), &vm.workload, &vm.vm())
                .map_err(RenderError::Render)?,
        )?;
    }
    Ok(())
}

/// The Namespace document that lets `kubectl apply -f` work on a cluster without it. Only its
/// name: applied to a namespace that exists, it changes nothing virtwork relies on, and it
/// carries no `virtwork/created-by-run` annotation, so `cleanup --delete-namespace` never
/// takes a namespace created this way (or an existing one) for virtwork's own.
fn namespace_document(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn document<T: Serialize>(
    kind: &str,
    name: Option<&str>,
    workload: &str,
    object: &T,
) -> Result<String> {
    let name = name.unwrap_or_default();
    let body = serde_yaml::to_string(object)
        .map_err(|err| Error::runtime(format!("rendering {kind} {name:?} as YAML: {err}")))?;
    Ok(format!("# {kind}: {name} (workload: {workload})\n{body}"))
}

/// The plan as one JSON document (docs/output-json.md). `mode` is `"client"` for
/// `--dry-run`, `"server"` for `--dry-run=server`.
pub fn plan_json(plan: &Plan, mode: &str) -> Result<Value> {
    let mut services = Vec::with_capacity(plan.services.len());
    for s in &plan.services {
        services.push(to_value("Service", &s.service)?);
    }
    let mut secrets = Vec::with_capacity(plan.vms.len());
    let mut vms = Vec::with_capacity(plan.vms.len());
    for vm in &plan.vms {
        secrets.push(to_value("Secret", &vm.secret())?);
        vms.push(to_value("VirtualMachine", &vm.vm())?);
    }
    let workloads: Vec<Value> = plan
        .workloads
        .iter()
        .map(|w| {
            json!({
                "name": w.name,
                "vm_count": w.vm_count,
                "cpu_cores": w.cpu_cores,
                "memory": w.memory,
                "data_disk_size": w.data_disk_size,
                "requires_service": w.requires_service,
            })
        })
        .collect();
    Ok(json!({
        "format_version": PLAN_JSON_FORMAT_VERSION,
        "command": "run",
        "dry_run": mode,
        "run_id": plan.run_id,
        "namespace": plan.namespace,
        "totals": {
            "workloads": plan.workloads.len(),
            "vms": plan.vms.len(),
            "secrets": plan.vms.len(),
            "services": plan.services.len(),
            "data_volumes": plan.data_volume_count(),
        },
        "workloads": workloads,
        "skipped_workloads": plan.skipped,
        "services": services,
        "secrets": secrets,
        "vms": vms,
    }))
}

fn to_value<T: Serialize>(what: &str, object: &T) -> Result<Value> {
    serde_json::to_value(object)
        .map_err(|err| Error::runtime(format!("rendering {what} as JSON: {err}")))
}
