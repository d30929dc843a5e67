//! The resource types the fake server knows (core v1, KubeVirt, CDI, OpenShift routes,
//! authorization) and the discovery documents (`/api`, `/apis`, `/apis/<group>/<version>`, `/version`) built from them.

use serde_json::{Value, json};

/// One served resource type: its group/version, plural, kind and scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceInfo {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Subresources served (`status`).
    pub has_status: bool,
    /// Only `create` (review APIs such as SelfSubjectAccessReview).
    pub create_only: bool,
    /// Built-in (non-CRD) types: their list items carry no apiVersion/kind.
    pub builtin: bool,
}

const CRUD_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl ResourceInfo {
    /// `kubevirt.io/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `secrets` or `virtualmachines.kubevirt.io`, as in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The `details` of a Status naming one object of this resource.
    pub fn details(&self, name: &str) -> Value {
        let mut d = json!({ "name": name, "kind": self.plural });
        if !self.group.is_empty() {
            d["group"] = json!(self.group);
        }
        if name.is_empty() {
            d.as_object_mut().unwrap().remove("name");
        }
        d
    }

    /// Whether this resource belongs to KubeVirt or CDI (switchable in discovery).
    pub fn is_virtualization(&self) -> bool {
        self.group == "kubevirt.io" || self.group == "cdi.kubevirt.io"
    }

    pub fn verbs(&self) -> &'static [&'static str] {
        if self.create_only {
            &["create"]
        } else {
            CRUD_VERBS
        }
    }
}

#[allow(clippy::too_many_arguments)] // one row of the RESOURCES table
const fn res(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    has_status: bool,
) -> ResourceInfo {
    ResourceInfo {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        short_names,
        has_status,
        create_only: false,
        builtin: !matches!(group.as_bytes(), b"kubevirt.io" | b"cdi.kubevirt.io"),
    }
}

/// Every resource the server serves, in discovery order.
pub const RESOURCES: &[ResourceInfo] = &[
    res(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        true,
    ),
    res("", "v1", "secrets", "secret", "Secret", true, &[], false),
    res(
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        true,
    ),
    res(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        true,
    ),
    res(
        "kubevirt.io",
        "v1",
        "virtualmachines",
        "virtualmachine",
        "VirtualMachine",
        true,
        &["vm", "vms"],
        true,
    ),
    res(
        "kubevirt.io",
        "v1",
        "virtualmachineinstances",
        "virtualmachineinstance",
        "VirtualMachineInstance",
        true,
        &["vmi", "vmis"],
        true,
    ),
    res(
        "cdi.kubevirt.io",
        "v1beta1",
        "datavolumes",
        "datavolume",
        "DataVolume",
        true,
        &["dv", "dvs"],
        true,
    ),
    // Read by run's preflight (a default StorageClass for data disks); tests insert them.
    res(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "storageclass",
        "StorageClass",
        false,
        &["sc"],
        false,
    ),
    // What every real namespace holds besides virtwork's objects: the control plane puts a
    // `kube-root-ca.crt` ConfigMap and a `default` ServiceAccount in each, and KubeVirt runs
    // each VMI in a virt-launcher Pod (all three simulated by the controllers).
    res("", "v1", "pods", "pod", "Pod", true, &["po"], true),
    res(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        false,
    ),
    res(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
        false,
    ),
    // OpenShift's Route (openshift-apiserver, not a CRD): verify reads the monitoring route
    // openshift-monitoring/thanos-querier; on other clusters it is simply absent.
    res(
        "route.openshift.io",
        "v1",
        "routes",
        "route",
        "Route",
        true,
        &[],
        true,
    ),
    // What else users keep in a namespace, and what cleanup's namespace check must see:
    // workloads, RBAC, Events, snapshots and a custom resource of a group nobody knows.
    res("", "v1", "events", "event", "Event", true, &["ev"], false),
    res(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        true,
    ),
    res(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        true,
        &["cj"],
        true,
    ),
    res(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        &[],
        false,
    ),
    res(
        "snapshot.storage.k8s.io",
        "v1",
        "volumesnapshots",
        "volumesnapshot",
        "VolumeSnapshot",
        true,
        &["vs"],
        true,
    ),
    res(
        "example.com",
        "v1",
        "widgets",
        "widget",
        "Widget",
        true,
        &[],
        false,
    ),
    // events.k8s.io/v1 Events: the API server serves the core Events again under this group
    // (kubernetes staging/src/k8s.io/api/events/v1/types.go, one storage behind both); here a
    // store of its own, enough for cleanup, which reads neither.
    res(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &[],
        false,
    ),
    // Pod metrics: namespaced and listable, but a view of the Pods, not objects of their own.
    res(
        "metrics.k8s.io",
        "v1beta1",
        "pods",
        "podmetrics",
        "PodMetrics",
        true,
        &[],
        false,
    ),
    // Nodes (preflight reads their allocatable; the scheduler and drains use them; tests
    // insert them), and the endpoints of Services (kept by the endpoint controllers).
    res("", "v1", "nodes", "node", "Node", false, &["no"], true),
    res(
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        false,
    ),
    // Served so the `policy` group is discovered (kubectl drain evicts only when it is);
    // none are created, so every eviction is decided by KubeVirt's rules alone (drain.rs).
    res(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        true,
    ),
    res(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        &[],
        false,
    ),
    ResourceInfo {
        create_only: true,
        ..res(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            "SelfSubjectAccessReview",
            false,
            &[],
            false,
        )
    },
    // Live migrations (`virtwork churn` creates them; cleanup removes them).
    res(
        "kubevirt.io",
        "v1",
        "virtualmachineinstancemigrations",
        "virtualmachineinstancemigration",
        "VirtualMachineInstanceMigration",
        true,
        &["vmim", "vmims"],
        true,
    ),
    // CDI's StorageProfiles (one per StorageClass, cluster-scoped; run's preflight lists
    // them; tests insert them): status.claimPropertySets are the access and volume modes a
    // class provides, the first being what a DataVolume naming none gets (controllers.rs).
    res(
        "cdi.kubevirt.io",
        "v1beta1",
        "storageprofiles",
        "storageprofile",
        "StorageProfile",
        false,
        &[],
        true,
    ),
];

/// Index of a resource by group/version/plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Index of a resource by any of its names: plural, singular, Kind, short name, or
/// `plural.group` (case-insensitive), for the test-facing accessors.
pub fn lookup(name: &str) -> Option<usize> {
    let n = name.to_ascii_lowercase();
    RESOURCES.iter().position(|r| {
        r.plural == n
            || r.singular == n
            || r.kind.eq_ignore_ascii_case(&n)
            || r.short_names.contains(&n.as_str())
            || r.qualified() == n
    })
}

/// Index of the resource for an object's apiVersion + kind.
pub fn by_api_version_kind(api_version: &str, kind: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.api_version() == api_version && r.kind == kind)
}

/// Group names served, in order, honouring the KubeVirt/CDI switch.
fn groups(virtualization: bool) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES {
        if r.group.is_empty() || (!virtualization && r.is_virtualization()) {
            continue;
        }
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// Whether `group/version` is served at all (given the KubeVirt/CDI switch).
pub fn group_version_served(group: &str, version: &str, virtualization: bool) -> bool {
    if group.is_empty() {
        return version == "v1";
    }
    groups(virtualization).contains(&(group, version))
}

/// `/apis/subresources.kubevirt.io/v1`: the lifecycle subresources virt-api registers
/// (pkg/virt-api/api.go: `virtualmachines/{start,stop,restart}` take `update`, i.e. PUT).
/// KubeVirt serves more (console, vnc, migrate, ...); these are the ones the fake answers.
pub fn kubevirt_subresources() -> Value {
    let resources: Vec<Value> = ["restart", "start", "stop"]
        .iter()
        .map(|action| {
            json!({
                "name": format!("virtualmachines/{action}"),
                "singularName": "",
                "namespaced": true,
                "kind": "VirtualMachine",
                "verbs": ["update"],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "subresources.kubevirt.io/v1",
        "resources": resources,
    })
}

/// `/api`: APIVersions.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }],
    })
}

/// `/apis`: APIGroupList.
pub fn group_list(virtualization: bool) -> Value {
    let groups: Vec<Value> = groups(virtualization)
        .into_iter()
        .map(|(g, v)| group_doc(g, v))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({ "groupVersion": format!("{group}/{version}"), "version": version });
    json!({ "name": group, "versions": [gv.clone()], "preferredVersion": gv })
}

/// `/apis/<group>`: APIGroup, or None when not served.
pub fn group(group: &str, virtualization: bool) -> Option<Value> {
    groups(virtualization)
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, v)| {
            let mut doc = group_doc(g, v);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

/// `/api/v1` or `/apis/<group>/<version>`: APIResourceList.
pub fn resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut doc = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
        });
        if !r.short_names.is_empty() {
            doc["shortNames"] = json!(r.short_names);
        }
        resources.push(doc);
        if r.has_status {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.plural == "pods" {
            // The Eviction API (drain.rs); kubectl drain looks for it here.
            resources.push(json!({
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": true,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources })
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/openapi/v3`: the index of per-group-version documents.
pub fn openapi_v3_index(virtualization: bool) -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({ "serverRelativeURL": "/openapi/v3/api/v1?hash=fake" }),
    );
    for (g, v) in groups(virtualization) {
        paths.insert(
            format!("apis/{g}/{v}"),
            json!({ "serverRelativeURL": format!("/openapi/v3/apis/{g}/{v}?hash=fake") }),
        );
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/<gv>`: just enough OpenAPI for kubectl to see that PATCH (and so every
/// write) accepts `fieldValidation`, so it leaves schema validation to the server.
pub fn openapi_v3_group_version(group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && !r.create_only)
    {
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        let gvk = json!({ "group": group, "version": version, "kind": r.kind });
        let params = json!([
            { "name": "dryRun", "in": "query", "schema": { "type": "string" } },
            { "name": "fieldManager", "in": "query", "schema": { "type": "string" } },
            { "name": "fieldValidation", "in": "query", "schema": { "type": "string" } },
        ]);
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", r.kind),
                "parameters": params,
                "responses": { "200": { "description": "OK" } },
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        paths.insert(path, json!({ "get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete") }));
    }
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": {} },
    })
}
