//! Checks before the first write of a run: can we reach the cluster, does it serve KubeVirt
//! (and CDI when a workload has data disks), may we create everything, is there a
//! StorageClass for the data disks (each named one exists; otherwise a default that CDI
//! honours), does every VM fit on some node (its CPU cores and memory within one node's
//! allocatable), and do objects of another run block our names.
//!
//! Every check is read-only (GET/LIST, discovery, SelfSubjectAccessReview), so a failing
//! preflight leaves the cluster untouched. Problems found after the cluster was reached are
//! gathered and reported together, each naming what is missing and how to fix it; the
//! error exits 1. Reachability problems name the server URL and the kubeconfig used.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error as StdError;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, Node, Secret, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::k8s::client::{Cluster, find_plugin_failure};
use crate::k8s::list::list_pages;
use crate::k8s::retry::{Failure, RetryError, RetryPolicy, classify, retry};
use crate::kubevirt::VirtualMachine;
use crate::labels;
use crate::model::{AccessMode, Quantity, VolumeMode};
use crate::plan::{Plan, PlannedVm};

/// How long we keep trying to reach an unresponsive API server before giving up.
const REACH_BUDGET: Duration = Duration::from_secs(3);
/// The annotation marking the default StorageClass (and its deprecated beta form).
const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];
/// The annotation marking the virtualization default class, which CDI prefers over the
/// Kubernetes default for DataVolumes that name no class.
const VIRT_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubevirt.io/is-default-virt-class";

/// What a run is about to do, as far as preflight cares.
#[derive(Debug, Clone, PartialEq)]
pub struct PreflightNeeds {
    pub namespace: String,
    pub run_id: String,
    pub services: BTreeSet<String>,
    pub secrets: BTreeSet<String>,
    pub vms: BTreeSet<String>,
    /// Some workload has a data disk: CDI is needed.
    pub data_disks: bool,
    /// StorageClasses the data disks name (`storage-class`); each must exist.
    pub storage_classes: BTreeSet<String>,
    /// Some data disk names no class: CDI's default class is needed.
    pub default_class: bool,
    /// (class, access mode, volume mode, workload) of every workload with data disks: the
    /// class's StorageProfile must offer the modes given, or name them when none are.
    pub disk_modes: BTreeSet<DiskModes>,
    /// The run will watch VMIs for readiness.
    pub wait_for_ready: bool,
    /// The size of each workload's VMs, checked against the nodes.
    pub sizes: Vec<VmSize>,
}

/// (class, access mode, volume mode, workload); `None`: CDI's default class or the
/// StorageProfile's choice.
pub type DiskModes = (
    Option<String>,
    Option<AccessMode>,
    Option<VolumeMode>,
    String,
);

/// What one VM of a workload asks of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct VmSize {
    pub workload: String,
    pub cpu_cores: u32,
    /// Memory request as written (e.g. `2Gi`) and in bytes.
    pub memory: String,
    pub memory_bytes: f64,
}

impl PreflightNeeds {
    pub fn from_plan(plan: &Plan, wait_for_ready: bool) -> Self {
        PreflightNeeds {
            namespace: plan.namespace.clone(),
            run_id: plan.run_id.to_string(),
            services: plan.services.iter().map(|s| s.service.name_any()).collect(),
            secrets: plan.vms.iter().map(PlannedVm::secret_name).collect(),
            vms: plan.vms.iter().map(|v| v.name.clone()).collect(),
            data_disks: plan.vms.iter().any(|v| !v.data_volumes.is_empty()),
            storage_classes: data_volume_classes(plan).flatten().collect(),
            default_class: data_volume_classes(plan).any(|class| class.is_none()),
            disk_modes: plan
                .vms
                .iter()
                .filter(|v| !v.data_volumes.is_empty())
                .map(|v| {
                    let class = v.storage_class().map(str::to_string);
                    (class, v.access_mode(), v.volume_mode(), v.workload.clone())
                })
                .collect(),
            wait_for_ready,
            sizes: plan
                .workloads
                .iter()
                .map(|w| VmSize {
                    workload: w.name.clone(),
                    cpu_cores: w.cpu_cores,
                    memory_bytes: w.memory.parse::<Quantity>().map_or(0.0, |q| q.value()),
                    memory: w.memory.clone(),
                })
                .collect(),
        }
    }
}

/// The StorageClass of every DataVolume template of the plan (`None`: no class named).
fn data_volume_classes(plan: &Plan) -> impl Iterator<Item = Option<String>> + '_ {
    // From the role templates: building every VM object here would cost what the plan saves.
    plan.vms
        .iter()
        .filter(|v| !v.data_volumes.is_empty())
        .map(|v| v.storage_class().map(str::to_string))
}

/// What preflight learned that later steps use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightReport {
    /// `major.minor` of the API server.
    pub server_version: String,
    pub namespace_exists: bool,
    /// Checks that could not be made (e.g. storage classes not listable), as warnings.
    pub warnings: Vec<String>,
    /// Which StorageClass the data disks will use, for the log (empty without data disks).
    pub storage: Vec<String>,
    /// How many nodes can take VMs (not cordoned, no `NoSchedule`/`NoExecute` taint, not
    /// marked unschedulable by KubeVirt, allocatable reported); `None` when nodes could not
    /// be listed.
    pub schedulable_nodes: Option<usize>,
}

/// The joined source chain of an error (see [`crate::error::chain_text`]).
pub fn error_chain(err: &(dyn StdError + 'static)) -> String {
    crate::error::chain_text(err)
}

/// Turns a failure to reach the server into a message naming the server and the credentials.
pub fn unreachable_error(cluster: &Cluster, err: &kube::Error) -> Error {
    let place = cluster.describe();
    if let kube::Error::Api(status) = err
        && status.code == 401
    {
        return Error::runtime(format!(
            "{place} rejected the credentials of context {:?} (401 Unauthorized: {}): \
             log in again or refresh the token in the kubeconfig",
            cluster.context,
            crate::terminal::safe(&status.message, crate::terminal::MESSAGE_CHARS)
        ));
    }
    if let Some(plugin) = find_plugin_failure(err) {
        return Error::runtime(format!(
            "{place}: the credentials of context {:?} could not be obtained: {plugin}",
            cluster.context
        ));
    }
    let detail = error_chain(err);
    if detail.to_ascii_lowercase().contains("certificate") {
        // The same words as every other transport failure: it was the certificate.
        return Error::runtime(format!(
            "cannot reach {place}: {}",
            crate::error::kube_text(err)
        ));
    }
    let hint = match classify(err) {
        Failure::Transient { .. } => "check that the cluster is up and the server URL is right",
        _ if detail.to_ascii_lowercase().contains("certificate")
            || detail.to_ascii_lowercase().contains("tls") =>
        {
            "check the certificate-authority data of the cluster in the kubeconfig"
        }
        _ => "check the server URL and credentials in the kubeconfig",
    };
    Error::runtime(format!("cannot reach {place}: {detail}; {hint}"))
}

/// A failed preflight request as a crate error; 401 becomes the credentials message
/// (some servers let `/version` through unauthenticated, so it can surface here).
fn failed(cluster: &Cluster, err: RetryError, context: String) -> Error {
    match err {
        RetryError::Failed {
            error: kube::Error::Api(status),
            ..
        } if status.code == 401 => unreachable_error(cluster, &kube::Error::Api(status)),
        other => other.into_error(context),
    }
}

/// Runs every check; `Ok` means the run may start writing.
pub async fn preflight(
    cluster: &Cluster,
    needs: &PreflightNeeds,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<PreflightReport> {
    let policy = RetryPolicy::until(deadline);
    let version = server_version(cluster, &policy, cancel).await?;
    let probe = Probe {
        cluster,
        client: &cluster.client,
        needs,
        policy,
        cancel,
    };
    let mut problems = check_apis(&probe).await?;
    let namespace_exists = namespace_exists(&probe).await?;
    problems.extend(check_permissions(&probe, namespace_exists).await?);
    if namespace_exists {
        problems.extend(check_name_conflicts(&probe).await?);
    }
    let mut warnings = Vec::new();
    let mut schedulable_nodes = None;
    match list_nodes(&probe).await? {
        Ok(survey) => {
            let fit = check_node_fit(&needs.sizes, &survey.usable);
            problems.extend(fit.problems);
            warnings.extend(fit.notes);
            warnings.extend(survey.none_usable_warning());
            schedulable_nodes = Some(survey.usable.len());
        }
        Err(warning) => warnings.push(format!(
            "{warning}; eviction strategies assume several nodes (on a single-node cluster pass --eviction-strategy none)"
        )),
    }
    let mut storage = Vec::new();
    if needs.data_disks {
        match check_storage_classes(&probe).await? {
            Ok(check) => {
                problems.extend(check.problems);
                warnings.extend(check.warnings);
                storage = check.notes;
            }
            Err(warning) => warnings.push(warning),
        }
    }

    if !problems.is_empty() {
        return Err(Error::runtime(format!(
            "preflight failed, nothing was created: {}",
            problems.join("; ")
        )));
    }
    Ok(PreflightReport {
        server_version: version,
        namespace_exists,
        warnings,
        storage,
        schedulable_nodes,
    })
}

/// What every preflight step reads: the cluster, what the plan needs, the retry policy.
struct Probe<'a> {
    cluster: &'a Cluster,
    client: &'a kube::Client,
    needs: &'a PreflightNeeds,
    policy: RetryPolicy,
    cancel: &'a CancellationToken,
}

/// `major.minor` of the API server, retried for a short while: an unreachable server fails
/// here with what to check; any Status other than 401 still proves a Kubernetes API answered.
async fn server_version(
    cluster: &Cluster,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<String> {
    let client = &cluster.client;
    let reach_policy = policy.retrying_until(Instant::now() + REACH_BUDGET);
    let version = match retry(&reach_policy, cancel, "reaching the API server", || {
        client.apiserver_version()
    })
    .await
    {
        Ok(v) => format!("{}.{}", v.major, v.minor),
        Err(RetryError::Cancelled) => return Err(Error::Interrupted),
        Err(RetryError::Failed { error, .. }) => {
            // Any Status other than 401 proves the server is there and speaking Kubernetes.
            match &error {
                kube::Error::Api(status) if status.code != 401 => String::new(),
                _ => return Err(unreachable_error(cluster, &error)),
            }
        }
    };

    Ok(version)
}

/// Discovery: the API groups and resources our objects need are served.
async fn check_apis(probe: &Probe<'_>) -> Result<Vec<String>> {
    let &Probe {
        cluster,
        client,
        needs,
        ref policy,
        cancel,
    } = probe;
    let mut problems = Vec::new();
    let mut groups = vec![(
        "kubevirt.io/v1",
        vec!["virtualmachines", "virtualmachineinstances"],
        "KubeVirt (OpenShift Virtualization) is not installed",
    )];
    if needs.data_disks {
        groups.push((
            "cdi.kubevirt.io/v1beta1",
            vec!["datavolumes"],
            "CDI (the Containerized Data Importer, needed for data disks) is not installed",
        ));
    }
    for (group_version, resources, missing) in groups {
        let listed = retry(policy, cancel, "API discovery", || {
            client.list_api_group_resources(group_version)
        })
        .await;
        match listed {
            Ok(list) => {
                let served: BTreeSet<&str> =
                    list.resources.iter().map(|r| r.name.as_str()).collect();
                let absent: Vec<&str> = resources
                    .iter()
                    .copied()
                    .filter(|r| !served.contains(r))
                    .collect();
                if !absent.is_empty() {
                    problems.push(format!(
                        "{missing}: {group_version} does not serve {}",
                        absent.join(", ")
                    ));
                }
            }
            Err(RetryError::Cancelled) => return Err(Error::Interrupted),
            Err(err) if err.failure() == Some(Failure::NotFound) => {
                problems.push(format!(
                    "{missing}: the API server does not serve {group_version}"
                ));
            }
            Err(err) => return Err(failed(cluster, err, format!("discovering {group_version}"))),
        }
    }

    Ok(problems)
}

/// Whether the namespace exists: created by the run when missing, used untouched when it
/// does. Forbidden to read it counts as missing here; the access review says so precisely.
async fn namespace_exists(probe: &Probe<'_>) -> Result<bool> {
    let &Probe {
        cluster,
        client,
        needs,
        ref policy,
        cancel,
    } = probe;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace_state = match retry(policy, cancel, "reading the namespace", || {
        namespaces.get_opt(&needs.namespace)
    })
    .await
    {
        Ok(found) => Some(found),
        Err(RetryError::Cancelled) => return Err(Error::Interrupted),
        // Forbidden to read it: the access review below says so precisely.
        Err(err) if err.failure() == Some(Failure::Permanent) => None,
        Err(err) => {
            return Err(failed(
                cluster,
                err,
                format!("reading namespace {}", needs.namespace),
            ));
        }
    };
    Ok(matches!(namespace_state, Some(Some(_))))
}

/// Access reviews: one per verb and kind the run will use.
async fn check_permissions(probe: &Probe<'_>, namespace_exists: bool) -> Result<Vec<String>> {
    let &Probe {
        cluster,
        client,
        needs,
        ref policy,
        cancel,
    } = probe;
    let review_api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let reviews = access_reviews(needs, namespace_exists);
    let checks = reviews.iter().map(|&access| {
        let review = access_review(access, &needs.namespace);
        let review_api = &review_api;
        async move {
            let params = PostParams::default();
            let result = retry(policy, cancel, "checking permissions", || {
                review_api.create(&params, &review)
            })
            .await;
            (access, result)
        }
    });
    let mut problems = Vec::new();
    for (access, result) in futures::future::join_all(checks).await {
        let status = match result {
            Ok(done) => done.status,
            Err(RetryError::Cancelled) => return Err(Error::Interrupted),
            Err(err) => {
                return Err(failed(
                    cluster,
                    err,
                    "checking permissions (SelfSubjectAccessReview)".to_string(),
                ));
            }
        };
        let allowed = status
            .as_ref()
            .is_some_and(|s| s.allowed && !s.denied.unwrap_or(false));
        if !allowed {
            let reason = status.and_then(|s| s.reason);
            problems.push(not_allowed(access, &needs.namespace, reason));
        }
    }
    Ok(problems)
}

/// One access to check: API group, resource, verb, and the namespace (`None`: cluster-wide).
type Access<'a> = (&'static str, &'static str, &'static str, Option<&'a str>);

/// The accesses a run needs.
fn access_reviews(needs: &PreflightNeeds, namespace_exists: bool) -> Vec<Access<'_>> {
    // An existing namespace is used as it is (never patched), so only a missing one needs
    // `create`.
    let mut reviews: Vec<Access<'_>> = vec![("", "namespaces", "get", None)];
    if !namespace_exists {
        reviews.push(("", "namespaces", "create", None));
    }
    let ns = Some(needs.namespace.as_str());
    if !needs.services.is_empty() {
        reviews.push(("", "services", "create", ns));
        reviews.push(("", "services", "list", ns));
    }
    reviews.push(("", "secrets", "create", ns));
    reviews.push(("", "secrets", "list", ns));
    reviews.push(("kubevirt.io", "virtualmachines", "create", ns));
    reviews.push(("kubevirt.io", "virtualmachines", "list", ns));
    if needs.wait_for_ready {
        reviews.push(("kubevirt.io", "virtualmachineinstances", "list", ns));
        reviews.push(("kubevirt.io", "virtualmachineinstances", "watch", ns));
        // The VMs' and DataVolumes' statuses say why a VM does not start.
        reviews.push(("kubevirt.io", "virtualmachines", "watch", ns));
        if needs.data_disks {
            reviews.push(("cdi.kubevirt.io", "datavolumes", "list", ns));
            reviews.push(("cdi.kubevirt.io", "datavolumes", "watch", ns));
        }
    }
    reviews
}

/// The SelfSubjectAccessReview of `access`; the namespace object itself is named.
fn access_review(
    (group, resource, verb, namespace): Access<'_>,
    run_namespace: &str,
) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_string()),
                resource: Some(resource.to_string()),
                verb: Some(verb.to_string()),
                namespace: namespace.map(str::to_string),
                name: (resource == "namespaces").then(|| run_namespace.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `not allowed to create virtualmachines.kubevirt.io in namespace x (reason)`.
fn not_allowed(
    (group, resource, verb, namespace): Access<'_>,
    run_namespace: &str,
    reason: Option<String>,
) -> String {
    let kind = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let place = match namespace {
        Some(ns) => format!(" in namespace {ns}"),
        None => format!(" ({run_namespace})"),
    };
    let reason = reason
        .filter(|r| !r.is_empty())
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    format!("not allowed to {verb} {kind}{place}{reason}")
}

/// Objects of another run (or of no run) already holding the names this run needs.
async fn check_name_conflicts(probe: &Probe<'_>) -> Result<Vec<String>> {
    let &Probe {
        client,
        needs,
        ref policy,
        cancel,
        ..
    } = probe;
    let mut problems = Vec::new();
    let mut conflicts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let selector = labels::managed_selector(None);
    collect_conflicts::<VirtualMachine>(
        client,
        needs,
        &needs.vms,
        &selector,
        policy,
        cancel,
        &mut conflicts,
    )
    .await?;
    collect_conflicts::<Secret>(
        client,
        needs,
        &needs.secrets,
        &selector,
        policy,
        cancel,
        &mut conflicts,
    )
    .await?;
    if !needs.services.is_empty() {
        collect_conflicts::<Service>(
            client,
            needs,
            &needs.services,
            &selector,
            policy,
            cancel,
            &mut conflicts,
        )
        .await?;
    }
    for (run, objects) in conflicts {
        let remedy = if run.is_empty() {
            "delete them".to_string()
        } else {
            format!(
                "remove them with `virtwork cleanup --namespace {} --run-id {run}`",
                needs.namespace
            )
        };
        problems.push(format!(
            "namespace {} already holds objects of virtwork run {} with the names this run needs: {}; {remedy} or choose another --namespace",
            needs.namespace,
            if run.is_empty() { "<none>" } else { run.as_str() },
            objects.join(", ")
        ));
    }
    Ok(problems)
}

/// The named StorageClasses exist, and CDI has a default for disks that name none. Inner
/// `Err`: the classes could not be listed, a warning rather than a failure.
async fn check_storage_classes(
    probe: &Probe<'_>,
) -> Result<std::result::Result<StorageCheck, String>> {
    let &Probe {
        client,
        needs,
        ref policy,
        cancel,
        ..
    } = probe;
    let classes: Api<StorageClass> = Api::all(client.clone());
    let params = ListParams::default();
    match retry(policy, cancel, "listing storage classes", || {
        classes.list(&params)
    })
    .await
    {
        Ok(list) => {
            let found: Vec<ClassInfo> = list.items.iter().map(ClassInfo::of).collect();
            let mut check = check_storage(needs, &found);
            let default = match cdi_default_classes(&found).0.as_slice() {
                [one] => Some(one.to_string()),
                _ => None,
            };
            match list_storage_profiles(probe).await? {
                Ok(profiles) => {
                    let modes = check_profiles(needs, default.as_deref(), &profiles);
                    check.problems.extend(modes.problems);
                    check.notes.extend(modes.notes);
                    check.warnings.extend(modes.warnings);
                }
                Err(warning) => check.warnings.push(warning),
            }
            Ok(Ok(check))
        }
        Err(RetryError::Cancelled) => Err(Error::Interrupted),
        Err(RetryError::Failed { error, .. }) => Ok(Err(format!(
            "could not check the StorageClasses ({}); data disks stay Pending if their class does not exist or there is no default class",
            error_chain(&error)
        ))),
    }
}

/// A node as the size check sees it: what it can allocate to pods.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCapacity {
    pub name: String,
    /// Allocatable CPUs (cores, fractional).
    pub cpu: f64,
    /// Allocatable memory in bytes.
    pub memory_bytes: f64,
}

impl NodeCapacity {
    /// The allocatable of a node virtwork's VMs can be scheduled on; `None` for one they
    /// cannot ([`why_not_schedulable`]) or one without figures.
    fn of(node: &Node) -> Option<NodeCapacity> {
        if why_not_schedulable(node).is_some() {
            return None;
        }
        let allocatable = node.status.as_ref()?.allocatable.as_ref()?;
        let amount = |key: &str| -> Option<f64> {
            allocatable
                .get(key)?
                .0
                .parse::<Quantity>()
                .ok()
                .map(|q| q.value())
        };
        Some(NodeCapacity {
            name: node.name_any(),
            cpu: amount("cpu")?,
            memory_bytes: amount("memory")?,
        })
    }
}

/// KubeVirt's label on nodes virt-handler serves; `"false"` once it stops serving one.
const SCHEDULABLE_LABEL: &str = "kubevirt.io/schedulable";

/// Pure: why the scheduler would place none of virtwork's virt-launcher Pods on `node`, or
/// `None` when it could. Cordoned; a `NoSchedule` or `NoExecute` taint (the scheduler's
/// TaintToleration filter: virtwork's VMs carry no tolerations, and KubeVirt copies only
/// the VMI's own to the launcher), e.g. the control-plane nodes of most clusters; or marked
/// `kubevirt.io/schedulable=false` by virt-handler (every launcher Pod selects `"true"`).
/// A node without that label counts, as virt-handler may not have labelled it yet.
pub fn why_not_schedulable(node: &Node) -> Option<String> {
    let spec = node.spec.as_ref();
    if spec.and_then(|s| s.unschedulable) == Some(true) {
        return Some("cordoned".into());
    }
    if let Some(taint) = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .find(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
    {
        return Some(format!("tainted {}:{}", taint.key, taint.effect));
    }
    if node.labels().get(SCHEDULABLE_LABEL).map(String::as_str) == Some("false") {
        return Some(format!("{SCHEDULABLE_LABEL}=false"));
    }
    None
}

/// The nodes as preflight sees them: those VMs can be scheduled on (with their
/// allocatable), and the others with the reason.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeSurvey {
    pub usable: Vec<NodeCapacity>,
    /// `(name, reason)` of each node no VM can be scheduled on.
    pub excluded: Vec<(String, String)>,
}

impl NodeSurvey {
    /// Pure: sorts listed nodes into usable and excluded.
    pub fn of(nodes: &[Node]) -> NodeSurvey {
        let mut survey = NodeSurvey::default();
        for node in nodes {
            match why_not_schedulable(node) {
                Some(reason) => survey.excluded.push((node.name_any(), reason)),
                None => survey.usable.extend(NodeCapacity::of(node)),
            }
        }
        survey
    }

    /// A warning when nodes exist but none can take a VM (every VM would stay Scheduling).
    pub fn none_usable_warning(&self) -> Option<String> {
        if !self.usable.is_empty() || self.excluded.is_empty() {
            return None;
        }
        let shown: Vec<String> = self
            .excluded
            .iter()
            .take(5)
            .map(|(name, why)| crate::terminal::safe(&format!("{name} ({why})"), 320))
            .collect();
        let more = self.excluded.len().saturating_sub(shown.len());
        Some(format!(
            "no node can take the VMs: {}{}: the VMs stay Scheduling until one can",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ))
    }
}

/// The nodes VMs can be scheduled on, with their allocatable. Inner `Err`: nodes could not
/// be listed (e.g. RBAC without `list nodes`), a warning rather than a failure.
async fn list_nodes(probe: &Probe<'_>) -> Result<std::result::Result<NodeSurvey, String>> {
    let nodes: Api<Node> = Api::all(probe.client.clone());
    let params = ListParams::default();
    match retry(&probe.policy, probe.cancel, "listing nodes", || {
        nodes.list(&params)
    })
    .await
    {
        Ok(list) => Ok(Ok(NodeSurvey::of(&list.items))),
        Err(RetryError::Cancelled) => Err(Error::Interrupted),
        Err(RetryError::Failed { error, .. }) => Ok(Err(format!(
            "could not check that the VMs fit on a node ({}); a VM larger than every node stays Scheduling",
            error_chain(&error)
        ))),
    }
}

/// KubeVirt's default `cpuAllocationRatio`: a VM without dedicated CPUs requests one tenth
/// of a CPU per vCPU for its launcher pod.
const CPU_ALLOCATION_RATIO: f64 = 10.0;

/// Pure: problems for each workload whose VM the scheduler could place on no schedulable
/// node (its memory request, and its launcher's CPU request of cores / 10, within one node's
/// allocatable), naming the largest node; notes (warnings) for VMs with more vCPUs than any
/// node has CPUs, which KubeVirt schedules but overcommits. A lower bound: KubeVirt adds
/// its own overhead to the launcher pod's memory, so a VM just under a node's allocatable
/// may still not schedule. No nodes visible: nothing to say.
pub fn check_node_fit(sizes: &[VmSize], nodes: &[NodeCapacity]) -> NodeFit {
    let mut fit = NodeFit::default();
    let Some(largest) = nodes.iter().max_by(|a, b| {
        (a.memory_bytes, a.cpu)
            .partial_cmp(&(b.memory_bytes, b.cpu))
            .unwrap_or(std::cmp::Ordering::Equal)
    }) else {
        return fit;
    };
    let most_cpus = nodes.iter().map(|n| n.cpu).fold(0.0, f64::max);
    let gib = |bytes: f64| format!("{:.1}Gi", bytes / f64::from(1u32 << 30));
    for vm in sizes {
        let cores = f64::from(vm.cpu_cores);
        let schedulable = nodes
            .iter()
            .any(|n| cores / CPU_ALLOCATION_RATIO <= n.cpu && vm.memory_bytes <= n.memory_bytes);
        if !schedulable {
            fit.problems.push(format!(
                "workload {:?} asks for {} of memory and {} CPU cores per VM, more than any node \
                 can allocate (the largest, {}, has {} and {} CPUs allocatable): lower memory or \
                 cpu-cores (--memory, --cpu-cores, or workloads.{}.memory / .cpu-cores) to fit",
                vm.workload,
                vm.memory,
                vm.cpu_cores,
                largest.name,
                gib(largest.memory_bytes),
                largest.cpu,
                vm.workload
            ));
        } else if cores > most_cpus {
            fit.notes.push(format!(
                "workload {:?} has {} vCPUs per VM, more than any node's {most_cpus} allocatable \
                 CPUs: KubeVirt schedules it (a launcher requests 1/10 CPU per vCPU) but its vCPUs \
                 share fewer host CPUs",
                vm.workload, vm.cpu_cores
            ));
        }
    }
    fit
}

/// What [`check_node_fit`] found.
#[derive(Debug, Default, PartialEq)]
pub struct NodeFit {
    /// VMs no node can run: the run is refused.
    pub problems: Vec<String>,
    /// VMs that run overcommitted: warnings.
    pub notes: Vec<String>,
}

/// A StorageClass as the storage check sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClassInfo {
    name: String,
    kubernetes_default: bool,
    virt_default: bool,
}

impl ClassInfo {
    fn of(class: &StorageClass) -> ClassInfo {
        let annotations = class.annotations();
        let set = |key: &str| annotations.get(key).map(String::as_str) == Some("true");
        ClassInfo {
            name: class.name_any(),
            kubernetes_default: DEFAULT_CLASS_ANNOTATIONS.iter().any(|a| set(a)),
            virt_default: set(VIRT_DEFAULT_CLASS_ANNOTATION),
        }
    }

    fn describe(&self) -> String {
        match (self.virt_default, self.kubernetes_default) {
            (true, true) => format!("{} (virtualization default, default)", self.name),
            (true, false) => format!("{} (virtualization default)", self.name),
            (false, true) => format!("{} (default)", self.name),
            (false, false) => self.name.clone(),
        }
    }
}

/// Problems (refusing the run), notes (for the log) and warnings of the storage check.
#[derive(Debug, Default, PartialEq, Eq)]
struct StorageCheck {
    problems: Vec<String>,
    notes: Vec<String>,
    warnings: Vec<String>,
}

/// CDI's `StorageProfile` (`cdi.kubevirt.io/v1beta1`, cluster-scoped, one per StorageClass,
/// named like it): `status.claimPropertySets`, the access and volume modes the class can
/// provide, the first being what CDI gives a DataVolume that names none.
fn storage_profile_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "cdi.kubevirt.io".into(),
        version: "v1beta1".into(),
        api_version: "cdi.kubevirt.io/v1beta1".into(),
        kind: "StorageProfile".into(),
        plural: "storageprofiles".into(),
    }
}

/// One entry of a StorageProfile's `status.claimPropertySets`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClaimPropertySet {
    pub access_modes: Vec<String>,
    pub volume_mode: Option<String>,
}

impl ClaimPropertySet {
    fn describe(&self) -> String {
        match &self.volume_mode {
            Some(mode) => format!("{} ({mode})", self.access_modes.join("/")),
            None => self.access_modes.join("/"),
        }
    }
}

/// Every StorageProfile's claim property sets by class name. Inner `Err`: they could not be
/// listed, a warning rather than a failure.
async fn list_storage_profiles(
    probe: &Probe<'_>,
) -> Result<std::result::Result<BTreeMap<String, Vec<ClaimPropertySet>>, String>> {
    let resource = storage_profile_resource();
    let profiles: Api<kube::api::DynamicObject> = Api::all_with(probe.client.clone(), &resource);
    let params = ListParams::default();
    match retry(
        &probe.policy,
        probe.cancel,
        "listing storage profiles",
        || profiles.list(&params),
    )
    .await
    {
        Ok(list) => Ok(Ok(list
            .items
            .iter()
            .map(|p| {
                let sets = p
                    .data
                    .pointer("/status/claimPropertySets")
                    .cloned()
                    .and_then(|v| serde_json::from_value(v).ok())
                    .unwrap_or_default();
                (p.name_any(), sets)
            })
            .collect())),
        Err(RetryError::Cancelled) => Err(Error::Interrupted),
        Err(RetryError::Failed { error, .. }) => Ok(Err(format!(
            "could not read CDI's StorageProfiles ({}); a data disk whose class cannot provide its access mode stays Provisioning",
            error_chain(&error)
        ))),
    }
}

/// Pure: for each workload with data disks, the access and volume modes its class's
/// StorageProfile gives or refuses, as CDI decides them (containerized-data-importer
/// pkg/controller/datavolume/util.go, renderPvcSpecVolumeModeAndAccessModesAndStorageClass):
/// neither given, the first claim property set's, and "no accessMode specified in
/// StorageProfile" when it names none (getDefaultVolumeAndAccessMode); only the volume mode,
/// the access modes of the first set with that volume mode, else "no matching accessMode
/// specified in StorageProfile" (getDefaultAccessModes); only the access mode, the volume
/// mode of the first set offering it, else Kubernetes' Filesystem (getDefaultVolumeMode).
/// A PVC asking for what the class cannot provide never binds. `default` is the class CDI
/// gives disks that name none (when the cluster has exactly one). A class without a profile
/// is a warning: CDI creates one for every class, so it is not reconciled yet.
fn check_profiles(
    needs: &PreflightNeeds,
    default: Option<&str>,
    profiles: &BTreeMap<String, Vec<ClaimPropertySet>>,
) -> StorageCheck {
    let mut check = StorageCheck::default();
    for (named, access, volume, workload) in &needs.disk_modes {
        let Some(class) = named.as_deref().or(default) else {
            continue;
        };
        let Some(sets) = profiles.get(class) else {
            check.warnings.push(format!(
                "StorageClass {class} has no CDI StorageProfile yet, so the access and volume modes of workload {workload:?}'s data disks are not checked"
            ));
            continue;
        };
        judge_class_modes(&mut check, class, sets, (*access, *volume), workload);
    }
    check
}

/// Pure: what `class`'s claim property `sets` make of one workload's asked access and volume
/// modes (either may be left to the profile), as a note, a warning or a problem.
fn judge_class_modes(
    check: &mut StorageCheck,
    class: &str,
    sets: &[ClaimPropertySet],
    (access, volume): (Option<AccessMode>, Option<VolumeMode>),
    workload: &str,
) {
    let offered = || {
        sets.iter()
            .map(ClaimPropertySet::describe)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let offers_access =
        |s: &ClaimPropertySet, mode: AccessMode| s.access_modes.iter().any(|m| m == mode.as_str());
    let offers_volume =
        |s: &ClaimPropertySet, mode: VolumeMode| s.volume_mode.as_deref() == Some(mode.as_str());
    let flags = |what: &str| {
        format!(
            "choose one of those with --{what} (or workloads.{workload}.{what}), or another --storage-class"
        )
    };
    match (access, volume) {
            (Some(access), Some(volume)) if sets.iter().any(|s| offers_access(s, access) && offers_volume(s, volume)) => {
                check.notes.push(format!(
                    "data disks of workload {workload:?} are {access} ({volume}) on StorageClass {class} (access-mode, volume-mode)"
                ));
            }
            (Some(access), Some(volume)) if sets.is_empty() => check.warnings.push(format!(
                "the StorageProfile of StorageClass {class} names no access or volume modes, so whether it provides {access} ({volume}) for workload {workload:?} is not known"
            )),
            (Some(access), Some(volume)) => check.problems.push(format!(
                "StorageClass {class} cannot provide {access} ({volume}) for the data disks of workload {workload:?} \
                 (its StorageProfile offers {}): choose a pair it offers with --access-mode and --volume-mode \
                 (or workloads.{workload}.access-mode / volume-mode), or another --storage-class",
                offered()
            )),
            (Some(access), None) => match sets.iter().find(|s| offers_access(s, access)) {
                Some(set) => check.notes.push(format!(
                    "data disks of workload {workload:?} are {access} ({}) on StorageClass {class} (access-mode)",
                    set.volume_mode.as_deref().unwrap_or("Filesystem")
                )),
                None if sets.is_empty() => check.warnings.push(format!(
                    "the StorageProfile of StorageClass {class} names no access modes, so whether it provides {access} for workload {workload:?} is not known"
                )),
                None => check.problems.push(format!(
                    "StorageClass {class} cannot provide access mode {access} for the data disks of workload {workload:?} \
                     (its StorageProfile offers {}): {}",
                    offered(),
                    flags("access-mode")
                )),
            },
            (None, Some(volume)) => match sets.iter().find(|s| offers_volume(s, volume) && !s.access_modes.is_empty()) {
                Some(set) => check.notes.push(format!(
                    "data disks of workload {workload:?} get {} on StorageClass {class} (volume-mode; the access mode is its StorageProfile's)",
                    set.describe()
                )),
                None => check.problems.push(format!(
                    "StorageClass {class} cannot provide volume mode {volume} for the data disks of workload {workload:?} \
                     (its StorageProfile offers {}; CDI: \"no matching accessMode specified in StorageProfile {class}\"): {}",
                    if sets.is_empty() { "nothing".to_string() } else { offered() },
                    flags("volume-mode")
                )),
            },
            (None, None) => match sets.first() {
                Some(first) if !first.access_modes.is_empty() => check.notes.push(format!(
                    "data disks of workload {workload:?} get {} on StorageClass {class}, its StorageProfile's first choice",
                    first.describe()
                )),
                _ => check.problems.push(format!(
                    "the StorageProfile of StorageClass {class} names no access mode, so CDI cannot create the data disks of \
                     workload {workload:?} (\"no accessMode specified in StorageProfile {class}\"): give --access-mode \
                     (or workloads.{workload}.access-mode), or set spec.claimPropertySets on the StorageProfile"
                )),
            },
        }
}

/// Pure: every named class exists; disks that name none get CDI's choice, the
/// virtualization default class first, else the Kubernetes default.
fn check_storage(needs: &PreflightNeeds, classes: &[ClassInfo]) -> StorageCheck {
    let mut check = StorageCheck::default();
    let available = || {
        if classes.is_empty() {
            "none".to_string()
        } else {
            classes
                .iter()
                .map(ClassInfo::describe)
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for wanted in &needs.storage_classes {
        if classes.iter().any(|c| &c.name == wanted) {
            check.notes.push(format!(
                "data disks use StorageClass {wanted} (storage-class)"
            ));
        } else {
            check.problems.push(format!(
                "StorageClass {wanted:?} given with storage-class does not exist; available: {}",
                available()
            ));
        }
    }
    if needs.default_class {
        let (chosen, kind) = cdi_default_classes(classes);
        match chosen.as_slice() {
            [] => check.problems.push(format!(
                "no default StorageClass: workloads with data disks need one, or choose a class with --storage-class (available: {}); \
                 or mark a class default with `kubectl annotate storageclass <name> storageclass.kubevirt.io/is-default-virt-class=true`",
                available()
            )),
            [one] => check.notes.push(format!(
                "data disks without storage-class use StorageClass {one}, the cluster's {kind} class (CDI's choice)"
            )),
            several => check.notes.push(format!(
                "data disks without storage-class use one of the {kind} StorageClasses {} (CDI's choice; give --storage-class to pick one)",
                several.join(", ")
            )),
        }
    }
    check
}

/// The classes CDI may give a DataVolume that names none: the virtualization default ones,
/// else the Kubernetes default ones; and which kind of default they are.
fn cdi_default_classes(classes: &[ClassInfo]) -> (Vec<&str>, &'static str) {
    let names = |pick: fn(&ClassInfo) -> bool| -> Vec<&str> {
        classes
            .iter()
            .filter(|c| pick(c))
            .map(|c| c.name.as_str())
            .collect()
    };
    let virt = names(|c| c.virt_default);
    if !virt.is_empty() {
        return (virt, "virtualization default");
    }
    (names(|c| c.kubernetes_default), "default")
}

/// Adds `Kind name` to `conflicts[run_id]` for each managed object of `K` named like one of
/// ours but labelled with another run id.
async fn collect_conflicts<K>(
    client: &kube::Client,
    needs: &PreflightNeeds,
    ours: &BTreeSet<String>,
    selector: &str,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
    conflicts: &mut BTreeMap<String, Vec<String>>,
) -> Result<()>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let api: Api<K> = Api::namespaced(client.clone(), &needs.namespace);
    let what = format!("listing {kind} objects in namespace {}", needs.namespace);
    // Metadata only: names and labels are all this needs (and Secret data is never fetched).
    let mut found = Vec::new();
    list_pages(
        policy,
        cancel,
        &what,
        selector,
        |params| {
            let api = &api;
            async move { api.list_metadata(&params).await }
        },
        |items| {
            for item in items {
                let name = item.metadata.name.clone().unwrap_or_default();
                if ours.contains(&name) {
                    let owner = item
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(labels::RUN_ID))
                        .cloned()
                        .unwrap_or_default();
                    found.push((name, owner));
                }
            }
        },
    )
    .await?;
    for (name, owner) in found {
        if owner != needs.run_id {
            conflicts
                .entry(owner)
                .or_default()
                .push(format!("{kind} {name}"));
        }
    }
    for objects in conflicts.values_mut() {
        objects.sort();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, kubernetes_default: bool, virt_default: bool) -> ClassInfo {
        ClassInfo {
            name: name.into(),
            kubernetes_default,
            virt_default,
        }
    }

    fn needs(named: &[&str], default_class: bool) -> PreflightNeeds {
        PreflightNeeds {
            namespace: "ns".into(),
            run_id: "r".into(),
            services: BTreeSet::new(),
            secrets: BTreeSet::new(),
            vms: BTreeSet::new(),
            data_disks: true,
            storage_classes: named.iter().map(|s| s.to_string()).collect(),
            default_class,
            disk_modes: BTreeSet::new(),
            wait_for_ready: false,
            sizes: Vec::new(),
        }
    }

    fn set(modes: &[&str], volume: &str) -> ClaimPropertySet {
        ClaimPropertySet {
            access_modes: modes.iter().map(|m| m.to_string()).collect(),
            volume_mode: Some(volume.into()),
        }
    }

    #[test]
    fn the_storage_profile_must_provide_the_mode_or_name_one() {
        let mut needs = needs(&["rbd"], true);
        needs.disk_modes = BTreeSet::from([
            (None, None, None, "disk".to_string()),
            (
                Some("rbd".into()),
                Some(AccessMode::ReadWriteMany),
                None,
                "database".to_string(),
            ),
            (
                Some("rbd".into()),
                Some(AccessMode::ReadWriteOnce),
                None,
                "chaos-disk".to_string(),
            ),
        ]);
        let profiles = BTreeMap::from([
            (
                "rbd".to_string(),
                vec![set(&["ReadWriteOnce"], "Filesystem")],
            ),
            ("virt".to_string(), vec![set(&["ReadWriteMany"], "Block")]),
            ("bare".to_string(), vec![]),
        ]);
        let check = check_profiles(&needs, Some("virt"), &profiles);
        assert_eq!(check.problems.len(), 1, "{check:?}");
        assert!(
            check.problems[0].contains("cannot provide access mode ReadWriteMany")
                && check.problems[0].contains("offers ReadWriteOnce (Filesystem)"),
            "{check:?}"
        );
        assert!(
            check
                .notes
                .iter()
                .any(|n| n.contains("\"disk\" get ReadWriteMany (Block) on StorageClass virt")),
            "{check:?}"
        );
        // The default class's profile names no mode: CDI would refuse the DataVolume.
        let check = check_profiles(&needs, Some("bare"), &profiles);
        assert!(
            check
                .problems
                .iter()
                .any(|p| p.contains("no accessMode specified in StorageProfile bare")),
            "{check:?}"
        );
        // No profile for the class, or no single default: not checked, said so.
        let check = check_profiles(&needs, Some("gone"), &profiles);
        assert!(
            check
                .warnings
                .iter()
                .any(|w| w.contains("gone has no CDI StorageProfile"))
        );
        let check = check_profiles(&needs, None, &profiles);
        assert_eq!(
            check.problems.len(),
            1,
            "only the named class is checked: {check:?}"
        );
    }

    /// CDI's three ways of filling in what a DataVolume leaves out, and a pair the class
    /// does not offer together.
    #[test]
    fn a_volume_mode_is_checked_as_cdi_fills_in_the_rest() {
        let disk = |access, volume| (Some("rbd".to_string()), access, volume, "disk".to_string());
        let profiles = BTreeMap::from([(
            "rbd".to_string(),
            vec![
                set(&["ReadWriteMany"], "Block"),
                set(&["ReadWriteOnce"], "Filesystem"),
            ],
        )]);
        let check_one = |modes: DiskModes| {
            let mut needs = needs(&["rbd"], false);
            needs.disk_modes = BTreeSet::from([modes]);
            check_profiles(&needs, None, &profiles)
        };
        // Only the volume mode: the access modes of the first set with it.
        let check = check_one(disk(None, Some(VolumeMode::Filesystem)));
        assert!(check.problems.is_empty(), "{check:?}");
        assert!(
            check.notes[0].contains("get ReadWriteOnce (Filesystem) on StorageClass rbd"),
            "{check:?}"
        );
        // Only the access mode: the volume mode of the first set offering it.
        let check = check_one(disk(Some(AccessMode::ReadWriteOnce), None));
        assert!(
            check.notes[0].contains("are ReadWriteOnce (Filesystem) on StorageClass rbd"),
            "{check:?}"
        );
        // Both, offered together.
        let check = check_one(disk(
            Some(AccessMode::ReadWriteMany),
            Some(VolumeMode::Block),
        ));
        assert!(check.problems.is_empty(), "{check:?}");
        // Both offered, but not together.
        let check = check_one(disk(
            Some(AccessMode::ReadWriteMany),
            Some(VolumeMode::Filesystem),
        ));
        assert!(
            check.problems[0].contains("cannot provide ReadWriteMany (Filesystem)")
                && check.problems[0]
                    .contains("offers ReadWriteMany (Block), ReadWriteOnce (Filesystem)"),
            "{check:?}"
        );
        // A volume mode the class has no set for: CDI's own refusal is quoted.
        let profiles = BTreeMap::from([(
            "rbd".to_string(),
            vec![set(&["ReadWriteOnce"], "Filesystem")],
        )]);
        let mut needs = needs(&["rbd"], false);
        needs.disk_modes = BTreeSet::from([disk(None, Some(VolumeMode::Block))]);
        let check = check_profiles(&needs, None, &profiles);
        assert!(
            check.problems[0].contains("cannot provide volume mode Block")
                && check.problems[0]
                    .contains("no matching accessMode specified in StorageProfile rbd")
                && check.problems[0].contains("--volume-mode (or workloads.disk.volume-mode)"),
            "{check:?}"
        );
    }

    fn size(workload: &str, cpu_cores: u32, memory: &str) -> VmSize {
        VmSize {
            workload: workload.into(),
            cpu_cores,
            memory: memory.into(),
            memory_bytes: memory.parse::<Quantity>().unwrap().value(),
        }
    }

    fn node(name: &str, spec: serde_json::Value, labels: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": labels },
            "spec": spec,
            "status": { "allocatable": { "cpu": "8", "memory": "32Gi" } },
        }))
        .unwrap()
    }

    #[test]
    fn only_nodes_a_launcher_can_be_placed_on_count() {
        let taint = |effect: &str| {
            serde_json::json!({ "taints": [
                { "key": "node-role.kubernetes.io/control-plane", "effect": effect }
            ] })
        };
        let none = serde_json::json!({});
        let nodes = [
            node("cp-0", taint("NoSchedule"), none.clone()),
            node("cp-1", taint("NoExecute"), none.clone()),
            node("soft", taint("PreferNoSchedule"), none.clone()),
            node("worker", none.clone(), none.clone()),
            node(
                "off",
                none.clone(),
                serde_json::json!({ "kubevirt.io/schedulable": "false" }),
            ),
            node(
                "on",
                none.clone(),
                serde_json::json!({ "kubevirt.io/schedulable": "true" }),
            ),
            node(
                "cordoned",
                serde_json::json!({ "unschedulable": true }),
                none.clone(),
            ),
        ];
        let survey = NodeSurvey::of(&nodes);
        let usable: Vec<&str> = survey.usable.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(usable, ["soft", "worker", "on"]);
        assert_eq!(
            survey.excluded,
            [
                (
                    "cp-0".into(),
                    "tainted node-role.kubernetes.io/control-plane:NoSchedule".into()
                ),
                (
                    "cp-1".into(),
                    "tainted node-role.kubernetes.io/control-plane:NoExecute".into()
                ),
                ("off".into(), "kubevirt.io/schedulable=false".into()),
                ("cordoned".into(), "cordoned".into()),
            ]
        );
        assert_eq!(survey.none_usable_warning(), None);
        let survey = NodeSurvey::of(&nodes[..2]);
        assert_eq!(
            survey.none_usable_warning().unwrap(),
            "no node can take the VMs: cp-0 (tainted node-role.kubernetes.io/control-plane:\
             NoSchedule), cp-1 (tainted node-role.kubernetes.io/control-plane:NoExecute): the \
             VMs stay Scheduling until one can"
        );
        assert_eq!(NodeSurvey::of(&[]).none_usable_warning(), None);
    }

    #[test]
    fn a_vm_must_fit_one_node_whole() {
        let gi = f64::from(1u32 << 30);
        let nodes = [
            NodeCapacity {
                name: "big-mem".into(),
                cpu: 4.0,
                memory_bytes: 60.0 * gi,
            },
            NodeCapacity {
                name: "big-cpu".into(),
                cpu: 32.0,
                memory_bytes: 8.0 * gi,
            },
        ];
        let fit = check_node_fit(&[size("cpu", 4, "60Gi"), size("memory", 32, "8Gi")], &nodes);
        assert_eq!(fit, NodeFit::default());
        // 60Gi fits only big-mem, whose 4 CPUs cannot hold the 80-core VM's request of 8.
        let fit = check_node_fit(&[size("cpu", 80, "16Gi"), size("disk", 1, "1Gi")], &nodes);
        assert_eq!(fit.problems.len(), 1, "{fit:?}");
        assert!(
            fit.problems[0].starts_with(
                "workload \"cpu\" asks for 16Gi of memory and 80 CPU cores per VM, more than any \
                 node can allocate (the largest, big-mem, has 60.0Gi and 4 CPUs allocatable)"
            ),
            "{}",
            fit.problems[0]
        );
        // More vCPUs than any node has CPUs schedules (a tenth of a CPU each), with a warning.
        let fit = check_node_fit(&[size("cpu", 40, "4Gi")], &nodes);
        assert!(fit.problems.is_empty(), "{fit:?}");
        assert!(fit.notes[0].contains("40 vCPUs per VM, more than any node's 32 allocatable CPUs"));
        assert_eq!(
            check_node_fit(&[size("cpu", 999, "1Ti")], &[]),
            NodeFit::default()
        );
    }

    #[test]
    fn the_virtualization_default_wins_over_the_kubernetes_default() {
        let classes = [
            class("standard", true, false),
            class("rbd-virt", false, true),
        ];
        let check = check_storage(&needs(&[], true), &classes);
        assert!(check.problems.is_empty());
        assert!(
            check.notes[0].contains("StorageClass rbd-virt"),
            "{check:?}"
        );
        let check = check_storage(&needs(&[], true), &classes[..1]);
        assert!(check.notes[0].contains("StorageClass standard, the cluster's default"));
    }

    #[test]
    fn named_classes_must_exist_and_need_no_default() {
        let classes = [class("fast", false, false), class("slow", false, false)];
        assert!(
            check_storage(&needs(&["fast"], false), &classes)
                .problems
                .is_empty()
        );
        let check = check_storage(&needs(&["gold"], false), &classes);
        assert_eq!(
            check.problems,
            [
                "StorageClass \"gold\" given with storage-class does not exist; available: fast, slow"
            ]
        );
        let check = check_storage(&needs(&[], true), &classes);
        assert!(
            check.problems[0].starts_with("no default StorageClass"),
            "{check:?}"
        );
    }

    #[test]
    fn error_chain_shows_nested_causes_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("client error (Connect)")
            }
        }
        impl StdError for Outer {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let err = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ));
        assert_eq!(
            error_chain(&err),
            "client error (Connect): Connection refused (os error 111)"
        );
    }
}
