//! What kubelet and the endpoint controllers do for the VMs' Services. Each virt-launcher Pod
//! mirrors its VMI: the node it runs on, the VMI's IP, and Ready exactly when the VMI is
//! Ready (KubeVirt puts the VMI's readiness probe on the launcher's compute container; a VMI
//! without one has a launcher that is Ready once its domain runs). Every Service's Endpoints
//! and EndpointSlice list the selected Pods that have an IP, ready or not ready, as
//! kube-controller-manager does: a Service sends traffic to ready endpoints only.

use serde_json::{Map, Value, json};

use super::resources;
use super::store::{Key, Store, meta_str};

fn idx(plural: &str) -> usize {
    resources::lookup(plural).unwrap()
}

fn condition_true(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|x| x["type"] == kind && x["status"] == "True"))
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Brings the launcher Pods of `vmi` in line with it. During a migration the VMI owns two
/// Pods; only the one on the VMI's current node serves it.
pub fn sync_launcher_pods(store: &mut Store, vmi: &Value) {
    let pods = idx("pods");
    let node = str_at(vmi, "/status/nodeName").to_string();
    let ip = str_at(vmi, "/status/interfaces/0/ipAddress").to_string();
    let running = str_at(vmi, "/status/phase") == "Running";
    let ready = running && condition_true(vmi, "Ready");
    for key in store.dependents_of(meta_str(vmi, "uid")) {
        if key.0 != pods {
            continue;
        }
        let Some(mut pod) = store.objects.get(&key).cloned() else {
            continue;
        };
        if str_at(&pod, "/spec/nodeName").is_empty() && !node.is_empty() {
            pod["spec"]["nodeName"] = json!(node);
        }
        let serving = running && str_at(&pod, "/spec/nodeName") == node;
        let pod_ready = if ready && serving { "True" } else { "False" };
        if serving && !ip.is_empty() {
            pod["status"]["podIP"] = json!(ip);
            pod["status"]["podIPs"] = json!([{ "ip": ip }]);
        }
        pod["status"]["conditions"] = json!([
            { "type": "PodScheduled", "status": if node.is_empty() { "False" } else { "True" } },
            { "type": "ContainersReady", "status": pod_ready },
            { "type": "Ready", "status": pod_ready },
        ]);
        store.put(&key, pod);
    }
}

/// The objects of resource `res` in namespace `ns`.
fn in_namespace(store: &Store, res: usize, ns: &str) -> Vec<Value> {
    store
        .objects
        .range((res, ns.to_string(), String::new())..)
        .take_while(|((r, n, _), _)| *r == res && n == ns)
        .map(|(_, v)| v.clone())
        .collect()
}

fn selects(selector: &Map<String, Value>, pod: &Value) -> bool {
    selector
        .iter()
        .all(|(k, v)| pod.pointer("/metadata/labels").and_then(|l| l.get(k)) == Some(v))
}

/// Recomputes the Endpoints and EndpointSlice of every Service in `ns` with a selector.
pub fn sync_endpoints(store: &mut Store, ns: &str) {
    let services = in_namespace(store, idx("services"), ns);
    if services.is_empty() {
        return;
    }
    let pods: Vec<Value> = in_namespace(store, idx("pods"), ns)
        .into_iter()
        .filter(|p| meta_str(p, "deletionTimestamp").is_empty())
        .filter(|p| !str_at(p, "/status/podIP").is_empty())
        .collect();
    for service in services {
        let Some(selector) = service
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        let selected: Vec<&Value> = pods.iter().filter(|p| selects(selector, p)).collect();
        publish(store, ns, &service, &selected);
    }
}

/// One selected Pod as an endpoint: its IP, node and whether it is Ready.
struct Member {
    ip: String,
    node: String,
    pod: String,
    ready: bool,
}

fn publish(store: &mut Store, ns: &str, service: &Value, pods: &[&Value]) {
    let name = meta_str(service, "name");
    let members: Vec<Member> = pods
        .iter()
        .map(|p| Member {
            ip: str_at(p, "/status/podIP").to_string(),
            node: str_at(p, "/spec/nodeName").to_string(),
            pod: meta_str(p, "name").to_string(),
            ready: condition_true(p, "Ready"),
        })
        .collect();
    let ports: Vec<Value> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    json!({
                        "name": p.get("name").cloned().unwrap_or(json!("")),
                        "port": p.get("targetPort").filter(|t| t.is_number()).or(p.get("port")).cloned(),
                        "protocol": p.get("protocol").cloned().unwrap_or(json!("TCP")),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let address = |m: &Member| {
        json!({ "ip": m.ip, "nodeName": m.node,
                "targetRef": { "kind": "Pod", "namespace": ns, "name": m.pod } })
    };
    let ready: Vec<Value> = members.iter().filter(|m| m.ready).map(address).collect();
    let not_ready: Vec<Value> = members.iter().filter(|m| !m.ready).map(address).collect();
    let mut subset = json!({ "ports": ports });
    if !ready.is_empty() {
        subset["addresses"] = json!(ready);
    }
    if !not_ready.is_empty() {
        subset["notReadyAddresses"] = json!(not_ready);
    }
    let subsets = if members.is_empty() {
        json!([])
    } else {
        json!([subset])
    };
    let owner = json!([{ "apiVersion": "v1", "kind": "Service", "name": name,
                         "uid": meta_str(service, "uid"), "controller": true,
                         "blockOwnerDeletion": true }]);
    let endpoints = json!({
        "metadata": { "name": name, "namespace": ns, "ownerReferences": owner },
        "subsets": subsets,
    });
    let slice = json!({
        "metadata": {
            "name": format!("{name}-fake"),
            "namespace": ns,
            "labels": { "kubernetes.io/service-name": name,
                        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io" },
            "ownerReferences": owner,
        },
        "addressType": "IPv4",
        "ports": ports.iter().map(|p| { let mut p = p.clone(); if p["name"] == "" { p.as_object_mut().unwrap().remove("name"); } p }).collect::<Vec<_>>(),
        "endpoints": members.iter().map(|m| json!({
            "addresses": [m.ip],
            "conditions": { "ready": m.ready, "serving": m.ready, "terminating": false },
            "nodeName": m.node,
            "targetRef": { "kind": "Pod", "namespace": ns, "name": m.pod },
        })).collect::<Vec<_>>(),
    });
    upsert_if_changed(store, idx("endpoints"), ns, endpoints);
    upsert_if_changed(store, idx("endpointslices"), ns, slice);
}

/// Creates `object`, or replaces the content fields of the stored one (keeping its uid); an
/// unchanged resync emits no watch event.
fn upsert_if_changed(store: &mut Store, res: usize, ns: &str, object: Value) {
    let key: Key = (res, ns.to_string(), meta_str(&object, "name").to_string());
    match store.objects.get(&key).cloned() {
        Some(mut current) => {
            for field in ["subsets", "endpoints", "ports", "addressType"] {
                match object.get(field) {
                    Some(value) => current[field] = value.clone(),
                    None => {
                        current.as_object_mut().unwrap().remove(field);
                    }
                }
            }
            store.put(&key, current);
        }
        None => {
            store.upsert(res, object);
        }
    }
}
