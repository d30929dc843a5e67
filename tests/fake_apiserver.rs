//! Fidelity tests of the fake Kubernetes API server (tests/support): wire semantics checked
//! over real HTTP with the real kube-rs client and with kubectl, plus the simulated
//! KubeVirt/CDI controllers, garbage collection and every fault knob.

use crate::support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
use support::{
    AccessAttributes, AfterCommit, Authorizer, ControllerOptions, Denial, EventType, FakeApiServer,
    FaultAction, Faults, Options, ScriptedFault,
};

/// Upper bound for anything that should happen "soon" (hang protection, never a timing claim).
const PATIENCE: Duration = Duration::from_secs(20);

fn server() -> FakeApiServer {
    FakeApiServer::start(Options {
        namespaces: vec!["vw".into()],
        ..Default::default()
    })
}

fn vm_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
        "virtualmachines",
    )
}
fn vmi_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachineInstance"),
        "virtualmachineinstances",
    )
}

fn vm_json(name: &str, image: &str, secret: Option<&str>) -> Value {
    let mut volumes = vec![json!({ "name": "containerdisk", "containerDisk": { "image": image } })];
    if let Some(s) = secret {
        volumes.push(
            json!({ "name": "cloudinitdisk", "cloudInitNoCloud": { "secretRef": { "name": s } } }),
        );
    }
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": { "name": name, "labels": { "app": "demo", "virtwork/run-id": "r1" } },
        "spec": {
            "runStrategy": "Always",
            "template": {
                "metadata": { "labels": { "app": "demo", "role": "server" } },
                "spec": { "domain": { "devices": {} }, "volumes": volumes },
            },
        },
    })
}

fn secret_json(name: &str, labels: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name, "labels": labels }, "stringData": { "userdata": "#cloud-config\n" } })
}

/// One raw request through kube's HTTP stack: (status, headers, body as JSON or string).
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<&Value>,
) -> (u16, hyper::HeaderMap, Value) {
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(kube::client::Body::from(bytes))
        .unwrap();
    let resp = client.send(req).await.expect("request sent");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let data = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let value = serde_json::from_slice(&data)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&data).into()));
    (status, headers, value)
}

async fn post(client: &kube::Client, path: &str, body: &Value) -> (u16, Value) {
    let (s, _, v) = raw(client, "POST", path, "application/json", Some(body)).await;
    (s, v)
}

async fn get(client: &kube::Client, path: &str) -> (u16, Value) {
    let (s, _, v) = raw(client, "GET", path, "application/json", None).await;
    (s, v)
}

/// Reads a whole (finite, timeoutSeconds-bounded) watch response into its events.
async fn watch_lines(client: &kube::Client, path: &str) -> Vec<Value> {
    let (status, _, body) =
        tokio::time::timeout(PATIENCE, raw(client, "GET", path, "application/json", None))
            .await
            .expect("watch ended");
    assert_eq!(status, 200, "{body}");
    let text = match body {
        Value::String(s) => s,
        other => other.to_string(),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn assert_status(body: &Value, code: u16, reason: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

/// Polls from async code without blocking the test runtime.
async fn eventually(server: &FakeApiServer, mut cond: impl FnMut(&FakeApiServer) -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if cond(server) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond(server)
}

fn phase_of(obj: &Value) -> String {
    obj.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn printable(server: &FakeApiServer, ns: &str, name: &str) -> String {
    server
        .get("vm", ns, name)
        .and_then(|v| {
            v.pointer("/status/printableStatus")
                .and_then(Value::as_str)
                .map(String::from)
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------- kube-rs client end to end

#[tokio::test]
async fn kube_client_crud_roundtrip_on_core_and_kubevirt_types() {
    let server = server();
    let client = server.client().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "vw");
    let created: Secret = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret_json("s1", json!({ "a": "1" }))).unwrap(),
        )
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(
        meta.uid.is_some() && meta.resource_version.is_some() && meta.creation_timestamp.is_some()
    );
    // stringData is folded into base64 data, as the real server does.
    assert_eq!(created.data.unwrap()["userdata"].0, b"#cloud-config\n");
    assert!(created.string_data.is_none());

    let got = secrets.get("s1").await.unwrap();
    assert_eq!(got.metadata.uid, meta.uid);
    let list = secrets
        .list(&ListParams::default().labels("a=1"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);

    let patched = secrets
        .patch(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "b": "2" } } })),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["b"], "2");
    assert_ne!(patched.metadata.resource_version, meta.resource_version);

    let vms: Api<DynamicObject> = Api::namespaced_with(client.clone(), "vw", &vm_resource());
    let vm: DynamicObject = serde_json::from_value(vm_json("vm-a", "fedora", None)).unwrap();
    let vm = vms.create(&PostParams::default(), &vm).await.unwrap();
    assert_eq!(vm.metadata.generation, Some(1));
    let applied = vms
        .patch(
            "vm-a",
            &PatchParams::apply("virtwork-test"),
            &Patch::Apply(json!({ "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": { "name": "vm-a", "annotations": { "x": "y" } } })),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.annotations.unwrap()["x"], "y");
    let deleted = secrets
        .delete("s1", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        deleted.is_right(),
        "a Secret delete answers with a Success Status"
    );
    let err = secrets.get("s1").await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.reason, "NotFound");
            assert_eq!(s.message, "secrets \"s1\" not found");
        }
        other => panic!("expected a NotFound Status, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_runtime_watcher_sees_vmi_phases_in_order() {
    let server = server();
    let client = server.client().await;
    let vmis: Api<DynamicObject> = Api::namespaced_with(client.clone(), "vw", &vmi_resource());
    let mut stream =
        kube::runtime::watcher(vmis, kube::runtime::watcher::Config::default()).boxed();
    // Wait for the initial list to finish before creating anything.
    loop {
        match tokio::time::timeout(PATIENCE, stream.try_next())
            .await
            .unwrap()
            .unwrap()
        {
            Some(kube::runtime::watcher::Event::InitDone) => break,
            Some(_) => {}
            None => panic!("watcher ended"),
        }
    }
    post(
        &client,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("vm-w", "fedora", None),
    )
    .await;
    let mut phases: Vec<String> = Vec::new();
    while phases.last().map(String::as_str) != Some("Running") {
        let ev = tokio::time::timeout(PATIENCE, stream.try_next())
            .await
            .expect("no hang")
            .unwrap()
            .unwrap();
        if let kube::runtime::watcher::Event::Apply(obj) = ev {
            let p = obj
                .data
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if phases.last() != Some(&p) {
                phases.push(p);
            }
        }
    }
    assert_eq!(phases, ["Pending", "Scheduling", "Scheduled", "Running"]);
    let vmi = server.get("vmi", "vw", "vm-w").unwrap();
    let owner = &vmi["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "VirtualMachine");
    assert_eq!(
        owner["uid"],
        server.get("vm", "vw", "vm-w").unwrap()["metadata"]["uid"]
    );
    assert_eq!(
        vmi["metadata"]["labels"]["role"], "server",
        "labels come from the template"
    );
    assert!(eventually(&server, |s| printable(s, "vw", "vm-w") == "Running").await);
    assert_eq!(
        server.get("vm", "vw", "vm-w").unwrap()["status"]["ready"],
        true
    );
}

// ------------------------------------------------------------------------- error Statuses

#[tokio::test]
async fn errors_are_real_status_objects() {
    let server = server();
    let c = server.client().await;
    let secrets = "/api/v1/namespaces/vw/secrets";

    let (s, b) = post(
        &c,
        "/api/v1/namespaces/missing/secrets",
        &secret_json("x", json!({})),
    )
    .await;
    assert_eq!(s, 404);
    assert_status(&b, 404, "NotFound");
    assert_eq!(b["message"], "namespaces \"missing\" not found");
    assert_eq!(
        b["details"],
        json!({ "name": "missing", "kind": "namespaces" })
    );

    assert_eq!(
        post(&c, secrets, &secret_json("dup", json!({}))).await.0,
        201
    );
    let (s, b) = post(&c, secrets, &secret_json("dup", json!({}))).await;
    assert_eq!(s, 409);
    assert_status(&b, 409, "AlreadyExists");
    assert_eq!(b["message"], "secrets \"dup\" already exists");

    let (s, b) = post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("dup-vm", "f", None),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("dup-vm", "f", None),
    )
    .await;
    assert_eq!(s, 409);
    assert_eq!(
        b["message"],
        "virtualmachines.kubevirt.io \"dup-vm\" already exists"
    );
    assert_eq!(b["details"]["group"], "kubevirt.io");

    // Stale resourceVersion on update.
    let mut stale = server.get("secret", "vw", "dup").unwrap();
    stale["metadata"]["resourceVersion"] = json!("1");
    let (s, _, b) = raw(
        &c,
        "PUT",
        &format!("{secrets}/dup"),
        "application/json",
        Some(&stale),
    )
    .await;
    assert_eq!(s, 409);
    assert_status(&b, 409, "Conflict");
    assert!(b["message"].as_str().unwrap().starts_with(
        "Operation cannot be fulfilled on secrets \"dup\": the object has been modified"
    ));

    // 422 Invalid: bad names, long label values, long VM names, oversized Secrets.
    let (s, b) = post(&c, secrets, &secret_json("Bad_Name", json!({}))).await;
    assert_eq!(s, 422);
    assert_status(&b, 422, "Invalid");
    assert_eq!(b["details"]["kind"], "Secret");
    assert_eq!(b["details"]["causes"][0]["field"], "metadata.name");
    let long = "a".repeat(64);
    let (s, b) = post(&c, secrets, &secret_json("ok", json!({ "k": long }))).await;
    assert_eq!(s, 422, "{b}");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("must be no more than 63 characters")
    );
    let (s, b) = post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json(&long, "f", None),
    )
    .await;
    assert_eq!(s, 422, "{b}");
    let big = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "big" }, "stringData": { "k": "x".repeat(1024 * 1024 + 1) } });
    let (s, b) = post(&c, secrets, &big).await;
    assert_eq!(s, 422, "{b}");
    assert_eq!(b["details"]["causes"][0]["field"], "data");
    // Undecodable base64 fails in the decoder: 400 BadRequest, as on a real server.
    let bad64 = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "b64" }, "data": { "k": "!!notbase64" } });
    let (s, b) = post(&c, secrets, &bad64).await;
    assert_eq!(s, 400);
    assert_status(&b, 400, "BadRequest");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("illegal base64 data at input byte 0")
    );
    // Namespace mismatch between body and URL.
    let mut other_ns = secret_json("mismatch", json!({}));
    other_ns["metadata"]["namespace"] = json!("default");
    assert_eq!(post(&c, secrets, &other_ns).await.0, 400);
    assert!(
        server.get("secret", "vw", "ok").is_none() && server.get("secret", "vw", "big").is_none()
    );
}

#[tokio::test]
async fn creating_in_a_terminating_namespace_is_forbidden() {
    let server = server();
    server.set_controllers(ControllerOptions {
        namespace_delete_delay: Duration::from_secs(600),
        ..Default::default()
    });
    let c = server.client().await;
    let (s, _, _) = raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/vw",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 200);
    let nsobj = server.get("namespace", "", "vw").unwrap();
    assert_eq!(nsobj["status"]["phase"], "Terminating");
    assert!(nsobj["metadata"]["deletionTimestamp"].is_string());
    let (s, b) = post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("late", json!({})),
    )
    .await;
    assert_eq!(s, 403);
    assert_status(&b, 403, "Forbidden");
    assert_eq!(
        b["message"],
        "secrets \"late\" is forbidden: unable to create new content in namespace vw because it is being terminated"
    );
    assert_eq!(b["details"]["causes"][0]["reason"], "NamespaceTerminating");
}

#[tokio::test]
async fn rbac_denials_use_the_authorizer_wording_and_ssar_agrees() {
    let server = server();
    server.set_faults(Faults {
        denials: vec![Denial::new("create", "virtualmachines").in_namespace("vw")],
        ..Default::default()
    });
    let c = server.client().await;
    let (s, b) = post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("d", "f", None),
    )
    .await;
    assert_eq!(s, 403);
    assert_status(&b, 403, "Forbidden");
    assert_eq!(
        b["message"],
        "virtualmachines.kubevirt.io is forbidden: User \"virtwork-tester\" cannot create resource \"virtualmachines\" in API group \"kubevirt.io\" in the namespace \"vw\""
    );
    // Other verbs and namespaces are unaffected.
    assert_eq!(
        get(&c, "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines")
            .await
            .0,
        200
    );
    let review = |verb: &str, ns: &str| {
        json!({ "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": { "resourceAttributes": { "namespace": ns, "verb": verb, "group": "kubevirt.io", "resource": "virtualmachines" } } })
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (s, b) = post(&c, path, &review("create", "vw")).await;
    assert_eq!(s, 201);
    assert_eq!(b["status"]["allowed"], false);
    assert_eq!(
        post(&c, path, &review("list", "vw")).await.1["status"]["allowed"],
        true
    );
    assert_eq!(
        post(&c, path, &review("create", "other")).await.1["status"]["allowed"],
        true
    );
}

/// An installed RBAC policy sees every resource request with kube-apiserver's RequestInfo
/// attributes (the namespace object is in its own namespace, a name field selector names the
/// object, a nameless DELETE is deletecollection, a proxy path is the `proxy` subresource),
/// never discovery; refusals are 403 in the authorizer's wording, before routing; access
/// reviews are answered by the same policy, with their attributes taken literally.
#[tokio::test]
async fn rbac_policy_sees_request_info_attributes_and_answers_reviews() {
    let server = server();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(
        Vec::<(AccessAttributes, String)>::new(),
    ));
    let seen = asked.clone();
    server.set_faults(Faults {
        authorizer: Some(Authorizer::new(move |attributes, via| {
            seen.lock()
                .unwrap()
                .push((attributes.clone(), via.to_string()));
            !(attributes.verb == "delete" && attributes.resource == "namespaces")
                && attributes.resource != "nonexistent"
        })),
        ..Default::default()
    });
    let c = server.client().await;
    let attributes =
        |verb: &str, resource: &str, sub: &str, ns: &str, name: &str| AccessAttributes {
            verb: verb.into(),
            group: String::new(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        };
    let cases = [
        (
            "GET",
            "/api/v1/namespaces/vw",
            attributes("get", "namespaces", "", "vw", "vw"),
        ),
        (
            "GET",
            "/api/v1/namespaces?fieldSelector=metadata.name%3Dvw&watch=true&timeoutSeconds=1",
            attributes("watch", "namespaces", "", "", "vw"),
        ),
        (
            "GET",
            "/api/v1/secrets?limit=5",
            attributes("list", "secrets", "", "", ""),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/vw/secrets",
            attributes("deletecollection", "secrets", "", "vw", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/monitoring/services/https:prometheus-k8s:9091/proxy/api/v1/query",
            attributes(
                "get",
                "services",
                "proxy",
                "monitoring",
                "https:prometheus-k8s:9091",
            ),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/vw/status",
            attributes("patch", "namespaces", "status", "vw", "vw"),
        ),
    ];
    for (method, path, expected) in cases {
        asked.lock().unwrap().clear();
        raw(
            &c,
            method,
            path,
            "application/merge-patch+json",
            Some(&json!({})),
        )
        .await;
        let got = asked.lock().unwrap().clone();
        assert_eq!(got.len(), 1, "{method} {path}: {got:?}");
        assert_eq!(got[0].0, expected, "{method} {path}");
        assert!(
            got[0].1.starts_with(&format!("{method} ")),
            "{:?}",
            got[0].1
        );
    }
    asked.lock().unwrap().clear();
    for path in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/kubevirt.io/v1",
        "/version",
    ] {
        assert_eq!(get(&c, path).await.0, 200, "{path}");
    }
    assert!(
        asked.lock().unwrap().is_empty(),
        "discovery is never authorized"
    );

    let (s, _, b) = raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/vw",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 403);
    assert_status(&b, 403, "Forbidden");
    assert_eq!(
        b["message"],
        "namespaces \"vw\" is forbidden: User \"virtwork-tester\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"vw\""
    );
    assert!(
        server.get("namespaces", "", "vw").is_some(),
        "refused, not done"
    );
    // Authorization comes before routing: a forbidden request to nothing is 403, not 404.
    assert_eq!(get(&c, "/api/v1/namespaces/vw/nonexistent").await.0, 403);

    let review = |verb: &str, ns: Option<&str>| {
        let mut attributes =
            json!({ "verb": verb, "group": "", "resource": "namespaces", "name": "vw" });
        if let Some(ns) = ns {
            attributes["namespace"] = json!(ns);
        }
        json!({ "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": { "resourceAttributes": attributes } })
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    asked.lock().unwrap().clear();
    assert_eq!(
        post(&c, path, &review("delete", None)).await.1["status"]["allowed"],
        false
    );
    assert_eq!(
        post(&c, path, &review("get", None)).await.1["status"]["allowed"],
        true
    );
    let got = asked.lock().unwrap().clone();
    let questions: Vec<&(AccessAttributes, String)> = got
        .iter()
        .filter(|(_, via)| via == "SelfSubjectAccessReview")
        .collect();
    assert_eq!(questions.len(), 2, "{got:?}");
    assert_eq!(
        questions[0].0,
        attributes("delete", "namespaces", "", "", "vw")
    );
}

#[tokio::test]
async fn bearer_token_and_tls_are_enforced() {
    let server = FakeApiServer::start(Options::secure());
    assert!(server.url().starts_with("https://127.0.0.1:"));
    let good = server.client().await;
    let (s, b) = get(&good, "/api/v1/namespaces").await;
    assert_eq!(s, 200, "{b}");
    let bad_yaml = server
        .kubeconfig_yaml(None)
        .replace("fake-token-0123456789", "wrong");
    let kc = kube::config::Kubeconfig::from_yaml(&bad_yaml).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let bad = kube::Client::try_from(cfg).unwrap();
    let (s, b) = get(&bad, "/api/v1/namespaces").await;
    assert_eq!(s, 401);
    assert_status(&b, 401, "Unauthorized");
    let ns: Api<Namespace> = Api::all(bad);
    assert!(
        matches!(ns.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 401)
    );
}

#[tokio::test]
async fn injected_failures_max_inflight_and_retry_after() {
    let server = server();
    let c = server.client_without_retries().await;
    server.set_faults(Faults {
        error_rate: 1.0,
        error_codes: vec![503],
        seed: 7,
        ..Default::default()
    });
    let (s, h, b) = raw(
        &c,
        "POST",
        "/api/v1/namespaces/vw/secrets",
        "application/json",
        Some(&secret_json("f", json!({}))),
    )
    .await;
    assert_eq!(s, 503);
    assert_status(&b, 503, "ServiceUnavailable");
    assert_eq!(h["retry-after"], "1");
    assert!(
        server.get("secret", "vw", "f").is_none(),
        "failed before commit"
    );
    assert_eq!(
        get(&c, "/api/v1/namespaces/vw/secrets").await.0,
        200,
        "reads are not failed by error_rate"
    );

    // APF-style limit: one slow request holds the only seat.
    server.set_faults(Faults {
        max_inflight: Some(1),
        retry_after_secs: 3,
        scripted: vec![ScriptedFault::new(
            "list",
            "secrets",
            FaultAction::Delay(Duration::from_millis(800)),
        )],
        ..Default::default()
    });
    let c2 = c.clone();
    let slow = tokio::spawn(async move { get(&c2, "/api/v1/namespaces/vw/secrets").await.0 });
    assert!(eventually(&server, |s| s.inflight() >= 1).await);
    let (s, h, b) = raw(
        &c,
        "GET",
        "/api/v1/namespaces/vw/services",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 429, "{b}");
    assert_status(&b, 429, "TooManyRequests");
    assert_eq!(h["retry-after"], "3");
    assert_eq!(slow.await.unwrap(), 200);

    // kube 5's default client retries 429 transparently, honouring Retry-After.
    server.set_faults(Faults {
        scripted: vec![ScriptedFault::new(
            "create",
            "secrets",
            FaultAction::Fail(429),
        )],
        ..Default::default()
    });
    server.clear_request_log();
    let secrets: Api<Secret> = Api::namespaced(server.client().await, "vw");
    let body: Secret = serde_json::from_value(secret_json("retried", json!({}))).unwrap();
    secrets
        .create(&PostParams::default(), &body)
        .await
        .expect("retried after 429");
    let statuses: Vec<u16> = server.request_log().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 201]);
}

#[tokio::test]
async fn failures_after_commit_persist_the_write() {
    let server = server();
    let c = server.client().await;
    server.set_faults(Faults {
        scripted: vec![
            ScriptedFault::new("create", "secrets", FaultAction::FailAfterCommit(500)).named("a"),
            ScriptedFault::new("create", "secrets", FaultAction::DropAfterCommit).named("b"),
            ScriptedFault::new("create", "secrets", FaultAction::Drop).named("c"),
        ],
        ..Default::default()
    });
    let (s, b) = post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("a", json!({})),
    )
    .await;
    assert_eq!(s, 500);
    assert_status(&b, 500, "InternalError");
    assert!(
        server.get("secret", "vw", "a").is_some(),
        "the write committed although the client saw 500"
    );

    let secrets: Api<Secret> = Api::namespaced(c.clone(), "vw");
    let dropped = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret_json("b", json!({}))).unwrap(),
        )
        .await;
    assert!(dropped.is_err(), "connection closed without a response");
    assert!(server.get("secret", "vw", "b").is_some());
    let dropped = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(secret_json("c", json!({}))).unwrap(),
        )
        .await;
    assert!(dropped.is_err());
    assert!(
        server.get("secret", "vw", "c").is_none(),
        "dropped before commit"
    );
    let log = server.request_log();
    let creates: Vec<_> = log.iter().filter(|r| r.verb == "create").collect();
    assert_eq!(
        creates
            .iter()
            .map(|r| (r.name.as_str(), r.status, r.committed))
            .collect::<Vec<_>>(),
        [("a", 500, true), ("b", 0, true), ("c", 0, false)]
    );
}

// --------------------------------------------------------------- lists, selectors, pages

#[tokio::test]
async fn label_selectors_support_the_full_syntax() {
    let server = server();
    let c = server.client().await;
    for (name, labels) in [
        ("s-a", json!({ "env": "prod", "tier": "db" })),
        ("s-b", json!({ "env": "dev", "tier": "web" })),
        ("s-c", json!({ "env": "qa" })),
        ("s-d", json!({})),
    ] {
        assert_eq!(
            post(
                &c,
                "/api/v1/namespaces/vw/secrets",
                &secret_json(name, labels)
            )
            .await
            .0,
            201
        );
    }
    let names = |sel: &str| {
        let c = c.clone();
        let sel = sel.to_string();
        async move {
            let q: String = sel
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            let (s, b) = get(
                &c,
                &format!("/api/v1/namespaces/vw/secrets?labelSelector={q}"),
            )
            .await;
            assert_eq!(s, 200, "{sel}: {b}");
            b["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("env=prod").await, ["s-a"]);
    assert_eq!(names("env==prod").await, ["s-a"]);
    assert_eq!(names("env!=prod").await, ["s-b", "s-c", "s-d"]);
    assert_eq!(names("env in (prod, dev)").await, ["s-a", "s-b"]);
    assert_eq!(names("env notin (prod,dev)").await, ["s-c", "s-d"]);
    assert_eq!(names("tier").await, ["s-a", "s-b"]);
    assert_eq!(names("!tier").await, ["s-c", "s-d"]);
    assert_eq!(names("env,!tier").await, ["s-c"]);
    assert_eq!(names("").await, ["s-a", "s-b", "s-c", "s-d"]);
    let (s, b) = get(
        &c,
        "/api/v1/namespaces/vw/secrets?labelSelector=env%20in%20prod",
    )
    .await;
    assert_eq!(s, 400, "{b}");
    let (_, b) = get(
        &c,
        "/api/v1/namespaces/vw/secrets?fieldSelector=metadata.name%3Ds-b",
    )
    .await;
    assert_eq!(b["items"].as_array().unwrap().len(), 1);
    // List shape: kind <Kind>List, RV, and core items without apiVersion/kind.
    let (_, b) = get(&c, "/api/v1/secrets").await;
    assert_eq!(b["kind"], "SecretList");
    assert_eq!(b["apiVersion"], "v1");
    assert!(b["metadata"]["resourceVersion"].is_string());
    assert!(b["items"][0].get("kind").is_none() && b["items"][0].get("apiVersion").is_none());
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("v", "f", None),
    )
    .await;
    let (_, b) = get(&c, "/apis/kubevirt.io/v1/virtualmachines").await;
    assert_eq!(b["kind"], "VirtualMachineList");
    assert_eq!(
        b["items"][0]["kind"], "VirtualMachine",
        "custom resources keep apiVersion/kind in lists"
    );
}

#[tokio::test]
async fn pagination_with_limit_and_continue_and_410_for_expired_tokens() {
    let server = server();
    let c = server.client().await;
    for i in 0..7 {
        post(
            &c,
            "/api/v1/namespaces/vw/secrets",
            &secret_json(&format!("p{i}"), json!({})),
        )
        .await;
    }
    let mut names = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let (s, b) = get(
            &c,
            &format!("/api/v1/namespaces/vw/secrets?limit=3&continue={token}"),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        pages += 1;
        names.extend(
            b["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string()),
        );
        match b["metadata"]["continue"].as_str() {
            Some(t) => {
                assert!(b["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                token = t.to_string();
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>());
    // kube-rs paginates the same way.
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "vw");
    let first = secrets.list(&ListParams::default().limit(5)).await.unwrap();
    assert_eq!(first.items.len(), 5);
    let cont = first.metadata.continue_.clone().unwrap();
    // A later write plus compaction makes the token's snapshot unavailable.
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("late", json!({})),
    )
    .await;
    server.compact();
    let (s, b) = get(
        &c,
        &format!("/api/v1/namespaces/vw/secrets?limit=5&continue={cont}"),
    )
    .await;
    assert_eq!(s, 410);
    assert_status(&b, 410, "Expired");
}

// --------------------------------------------------------------------------------- watch

#[tokio::test]
async fn watch_resource_version_semantics_and_selectors() {
    let server = server();
    let c = server.client().await;
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("w0", json!({ "k": "a" })),
    )
    .await;
    let rv = server.resource_version();
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("w1", json!({ "k": "a" })),
    )
    .await;
    raw(
        &c,
        "PATCH",
        "/api/v1/namespaces/vw/secrets/w0",
        "application/merge-patch+json",
        Some(&json!({ "metadata": { "labels": { "k": "b" } } })),
    )
    .await;
    raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/vw/secrets/w1",
        "application/json",
        None,
    )
    .await;

    // From an RV: exactly the later events.
    let evs = watch_lines(
        &c,
        &format!("/api/v1/namespaces/vw/secrets?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
    )
    .await;
    let seen: Vec<(String, String)> = evs
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().into(),
                e["object"]["metadata"]["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("ADDED".into(), "w1".into()),
            ("MODIFIED".into(), "w0".into()),
            ("DELETED".into(), "w1".into())
        ]
    );
    assert_eq!(
        evs[0]["object"]["kind"], "Secret",
        "watch objects carry kind"
    );

    // With a selector, leaving the selection is a DELETED event.
    let evs = watch_lines(&c, &format!("/api/v1/namespaces/vw/secrets?watch=true&resourceVersion={rv}&timeoutSeconds=1&labelSelector=k%3Da")).await;
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "DELETED", "DELETED"]);

    // RV "0" (and absent): synthetic ADDED for the current state.
    let evs = watch_lines(
        &c,
        "/api/v1/namespaces/vw/secrets?watch=1&resourceVersion=0&timeoutSeconds=1",
    )
    .await;
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (
            evs[0]["type"].as_str(),
            evs[0]["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("w0"))
    );

    // Compacted RV: one ERROR event with a 410 Status.
    server.compact();
    let evs = watch_lines(
        &c,
        &format!("/api/v1/namespaces/vw/secrets?watch=1&resourceVersion={rv}&timeoutSeconds=5"),
    )
    .await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["type"], "ERROR");
    assert_status(&evs[0]["object"], 410, "Expired");
}

#[tokio::test]
async fn watch_bookmarks_initial_events_and_stream_limits() {
    let server = FakeApiServer::start(Options {
        namespaces: vec!["vw".into()],
        bookmark_interval: Duration::from_millis(100),
        ..Default::default()
    });
    let c = server.client().await;
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("b0", json!({})),
    )
    .await;
    let evs = watch_lines(
        &c,
        "/api/v1/namespaces/vw/secrets?watch=true&timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
    )
    .await;
    assert_eq!(evs[0]["type"], "ADDED");
    assert_eq!(evs[1]["type"], "BOOKMARK");
    assert_eq!(
        evs[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(
        evs.iter().skip(2).any(|e| e["type"] == "BOOKMARK"),
        "periodic bookmarks"
    );
    assert!(
        evs.iter()
            .all(|e| e["type"] != "BOOKMARK" || e["object"]["kind"] == "Secret")
    );

    // watch_max_duration cuts streams short although the client asked for longer.
    server.set_faults(Faults {
        watch_max_duration: Some(Duration::from_millis(200)),
        ..Default::default()
    });
    let evs = watch_lines(
        &c,
        "/api/v1/namespaces/vw/secrets?watch=1&timeoutSeconds=3600",
    )
    .await;
    assert_eq!(evs.len(), 1);

    // kube-rs WatchParams against the fixture.
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "vw");
    let rv = server.resource_version().to_string();
    let mut stream = secrets
        .watch(&WatchParams::default().timeout(2), &rv)
        .await
        .unwrap()
        .boxed();
    let mut seeded = secret_json("b1", json!({}));
    seeded["metadata"]["namespace"] = json!("vw");
    server.insert(seeded);
    let ev = tokio::time::timeout(PATIENCE, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Added(s) if s.metadata.name.as_deref() == Some("b1")));
}

// ------------------------------------------------------------------- dry run and patches

#[tokio::test]
async fn dry_run_validates_but_persists_nothing() {
    let server = server();
    let c = server.client().await;
    let rv = server.resource_version();
    let (s, b) = post(
        &c,
        "/api/v1/namespaces/vw/secrets?dryRun=All",
        &secret_json("dry", json!({})),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(b["metadata"]["name"], "dry");
    assert!(server.get("secret", "vw", "dry").is_none());
    let (s, _) = post(
        &c,
        "/api/v1/namespaces/vw/secrets?dryRun=All",
        &secret_json("BAD", json!({})),
    )
    .await;
    assert_eq!(s, 422, "dry run still validates");
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("real", json!({})),
    )
    .await;
    let rv_after_create = server.resource_version();
    let (s, _, b) = raw(
        &c,
        "PATCH",
        "/api/v1/namespaces/vw/secrets/real?dryRun=All",
        "application/merge-patch+json",
        Some(&json!({ "metadata": { "labels": { "x": "1" } } })),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(b["metadata"]["labels"]["x"], "1");
    let (s, _, _) = raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/vw/secrets/real?dryRun=All",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 200);
    let mut upd = server.get("secret", "vw", "real").unwrap();
    upd["type"] = json!("Opaque");
    upd["metadata"]["annotations"] = json!({ "a": "b" });
    let (s, _, _) = raw(
        &c,
        "PUT",
        "/api/v1/namespaces/vw/secrets/real?dryRun=All",
        "application/json",
        Some(&upd),
    )
    .await;
    assert_eq!(s, 200);
    let stored = server.get("secret", "vw", "real").unwrap();
    assert!(
        stored["metadata"].get("annotations").is_none()
            && stored["metadata"]
                .get("labels")
                .is_none_or(|l| l.get("x").is_none())
    );
    assert_eq!(server.resource_version(), rv_after_create);
    assert!(rv_after_create > rv);
}

#[tokio::test]
async fn json_patch_strategic_merge_and_update_conflicts() {
    let server = server();
    let c = server.client().await;
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("p", json!({ "a": "1" })),
    )
    .await;
    let path = "/api/v1/namespaces/vw/secrets/p";
    let (s, _, b) = raw(&c, "PATCH", path, "application/json-patch+json", Some(&json!([{ "op": "add", "path": "/metadata/labels/b", "value": "2" }, { "op": "remove", "path": "/metadata/labels/a" }]))).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["metadata"]["labels"], json!({ "b": "2" }));
    let (s, _, b) = raw(
        &c,
        "PATCH",
        path,
        "application/strategic-merge-patch+json",
        Some(&json!({ "metadata": { "labels": { "c": "3" } } })),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(b["metadata"]["labels"], json!({ "b": "2", "c": "3" }));
    // A resourceVersion inside a merge patch is a precondition.
    let (s, _, b) = raw(
        &c,
        "PATCH",
        path,
        "application/merge-patch+json",
        Some(&json!({ "metadata": { "resourceVersion": "1" } })),
    )
    .await;
    assert_eq!(s, 409, "{b}");
    let (s, _, _) = raw(
        &c,
        "PATCH",
        "/api/v1/namespaces/vw/secrets/nope",
        "application/merge-patch+json",
        Some(&json!({})),
    )
    .await;
    assert_eq!(s, 404);
    let (s, _, _) = raw(&c, "PATCH", path, "text/plain", Some(&json!({}))).await;
    assert_eq!(s, 415);
    let current = server.get("secret", "vw", "p").unwrap();
    let (s, _, b) = raw(&c, "PUT", path, "application/json", Some(&current)).await;
    assert_eq!(s, 200);
    assert_eq!(
        b["metadata"]["resourceVersion"], current["metadata"]["resourceVersion"],
        "a no-op update keeps the RV"
    );
}

// ------------------------------------------------------------------- delete and GC

#[tokio::test]
async fn deleting_a_vm_collects_its_vmi_datavolumes_and_pvcs() {
    let server = server();
    let c = server.client().await;
    let mut vm = vm_json("vm-dv", "fedora", None);
    vm["spec"]["dataVolumeTemplates"] = json!([{
        "metadata": { "name": "disk-vm-dv", "labels": { "virtwork/run-id": "r1" } },
        "spec": { "source": { "blank": {} }, "storage": { "resources": { "requests": { "storage": "2Gi" } } } },
    }]);
    vm["spec"]["template"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "data", "dataVolume": { "name": "disk-vm-dv" } }));
    assert_eq!(
        post(
            &c,
            "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
            &vm
        )
        .await
        .0,
        201
    );
    assert!(eventually(&server, |s| printable(s, "vw", "vm-dv") == "Running").await);
    let dv = server.get("dv", "vw", "disk-vm-dv").unwrap();
    assert_eq!(phase_of(&dv), "Succeeded");
    assert_eq!(dv["metadata"]["labels"]["virtwork/run-id"], "r1");
    assert_eq!(
        dv["metadata"]["ownerReferences"][0]["kind"],
        "VirtualMachine"
    );
    let pvc = server.get("pvc", "vw", "disk-vm-dv").unwrap();
    assert_eq!(phase_of(&pvc), "Bound");
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "2Gi");
    // The VMI only left Scheduling after the DataVolume succeeded.
    let events = server.events();
    let dv_done = events
        .iter()
        .position(|e| e.name == "disk-vm-dv" && phase_of(&e.object) == "Succeeded")
        .unwrap();
    let scheduled = events
        .iter()
        .position(|e| e.name == "vm-dv" && phase_of(&e.object) == "Scheduled")
        .unwrap();
    assert!(dv_done < scheduled);

    let vms: Api<DynamicObject> = Api::namespaced_with(c.clone(), "vw", &vm_resource());
    let r = vms
        .delete("vm-dv", &DeleteParams::background())
        .await
        .unwrap();
    assert!(
        r.is_right(),
        "custom resources answer a finished delete with a Status"
    );
    assert!(
        eventually(&server, |s| s.objects("vmi", Some("vw")).is_empty()
            && s.objects("dv", Some("vw")).is_empty()
            && s.objects("pvc", Some("vw")).is_empty())
        .await
    );
    let deleted: Vec<&str> = events_after(&server.events(), "vm-dv")
        .into_iter()
        .collect();
    assert!(deleted.contains(&"persistentvolumeclaims"));
}

fn events_after(events: &[support::StoreEvent], _vm: &str) -> Vec<&'static str> {
    events
        .iter()
        .filter(|e| e.event_type == EventType::Deleted)
        .map(|e| support::apiserver::resources::RESOURCES[e.res].plural)
        .collect()
}

#[tokio::test]
async fn foreground_and_orphan_propagation() {
    let server = server();
    server.set_controllers(ControllerOptions {
        gc_delay: Duration::from_millis(50),
        ..Default::default()
    });
    let c = server.client().await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("fg", "f", None),
    )
    .await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("or", "f", None),
    )
    .await;
    assert!(
        eventually(&server, |s| s.get("vmi", "vw", "fg").is_some()
            && s.get("vmi", "vw", "or").is_some())
        .await
    );

    let (s, _, b) = raw(
        &c,
        "DELETE",
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines/fg",
        "application/json",
        Some(&json!({ "propagationPolicy": "Foreground" })),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        b["kind"], "VirtualMachine",
        "foreground delete returns the object being deleted"
    );
    assert_eq!(b["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(eventually(&server, |s| s.get("vm", "vw", "fg").is_none()).await);
    let ev = server.events();
    let vmi_gone = ev
        .iter()
        .position(|e| e.name == "fg" && e.res == 5 && e.event_type == EventType::Deleted)
        .unwrap();
    let vm_gone = ev
        .iter()
        .position(|e| e.name == "fg" && e.res == 4 && e.event_type == EventType::Deleted)
        .unwrap();
    assert!(
        vmi_gone < vm_gone,
        "dependents go first in foreground deletion"
    );

    let (s, _, _) = raw(
        &c,
        "DELETE",
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines/or?propagationPolicy=Orphan",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 200);
    let vmi = server
        .get("vmi", "vw", "or")
        .expect("orphaned VMI survives");
    assert!(vmi["metadata"].get("ownerReferences").is_none());
}

#[tokio::test]
async fn deleting_a_namespace_empties_it_then_removes_it() {
    let server = server();
    let c = server.client().await;
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("n1", json!({})),
    )
    .await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("n2", "f", None),
    )
    .await;
    let (s, _, b) = raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/vw",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(b["kind"], "Namespace");
    assert_eq!(b["status"]["phase"], "Terminating");
    assert!(eventually(&server, |s| s.get("namespace", "", "vw").is_none()).await);
    assert!(
        server.objects("secrets", Some("vw")).is_empty()
            && server.objects("vm", Some("vw")).is_empty()
    );
    let ev = server.events();
    let ns_gone = ev
        .iter()
        .rposition(|e| e.res == 0 && e.event_type == EventType::Deleted)
        .unwrap();
    assert!(
        ev.iter()
            .filter(|e| e.namespace == "vw" && e.event_type == EventType::Deleted)
            .all(|e| ev.iter().position(|x| std::ptr::eq(x, e)).unwrap() < ns_gone)
    );
    let (s, _, b) = raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/vw",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 404, "{b}");
}

#[tokio::test]
async fn deletecollection_by_label() {
    let server = server();
    let c = server.client().await;
    for (n, run) in [("d1", "a"), ("d2", "a"), ("d3", "b")] {
        post(
            &c,
            "/api/v1/namespaces/vw/secrets",
            &secret_json(n, json!({ "run": run })),
        )
        .await;
    }
    let (s, _, b) = raw(
        &c,
        "DELETE",
        "/api/v1/namespaces/vw/secrets?labelSelector=run%3Da",
        "application/json",
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["kind"], "SecretList");
    assert_eq!(b["items"].as_array().unwrap().len(), 2);
    let left: Vec<Value> = server.objects("secrets", Some("vw"));
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["metadata"]["name"], "d3");
}

// ----------------------------------------------------------------- controller behaviour

#[tokio::test]
async fn vmi_waits_for_its_cloud_init_secret() {
    let server = server();
    let c = server.client().await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("ci", "fedora", Some("ci-userdata")),
    )
    .await;
    assert!(
        eventually(&server, |s| s
            .get("vmi", "vw", "ci")
            .is_some_and(|v| phase_of(&v) == "Scheduling"))
        .await
    );
    assert_eq!(printable(&server, "vw", "ci"), "Starting");
    assert_eq!(
        post(
            &c,
            "/api/v1/namespaces/vw/secrets",
            &secret_json("ci-userdata", json!({}))
        )
        .await
        .0,
        201
    );
    assert!(eventually(&server, |s| printable(s, "vw", "ci") == "Running").await);
    let ev = server.events();
    let secret_added = ev.iter().position(|e| e.name == "ci-userdata").unwrap();
    let scheduled = ev
        .iter()
        .position(|e| e.name == "ci" && phase_of(&e.object) == "Scheduled")
        .unwrap();
    assert!(
        secret_added < scheduled,
        "the VMI did not schedule before its Secret existed"
    );
}

#[tokio::test]
async fn failing_and_unschedulable_images() {
    let server = server();
    server.set_controllers(ControllerOptions {
        fail_image_pattern: Some("broken".into()),
        unschedulable_image_pattern: Some("huge".into()),
        ..Default::default()
    });
    let c = server.client().await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("bad", "registry/broken:1", None),
    )
    .await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("big", "registry/huge:1", None),
    )
    .await;
    assert!(eventually(&server, |s| printable(s, "vw", "bad") == "CrashLoopBackOff").await);
    let failed = server.get("vmi", "vw", "bad").unwrap();
    assert_eq!(phase_of(&failed), "Failed");
    assert!(
        failed["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("registry/broken:1")
    );
    assert!(
        eventually(&server, |s| printable(s, "vw", "big")
            == "ErrorUnschedulable")
        .await
    );
    let vmi = server.get("vmi", "vw", "big").unwrap();
    assert_eq!(phase_of(&vmi), "Scheduling");
    assert_eq!(vmi["status"]["conditions"][0]["reason"], "Unschedulable");
    assert_eq!(
        server.get("vm", "vw", "big").unwrap()["status"]["ready"],
        false
    );
}

#[tokio::test]
async fn halting_a_vm_removes_its_vmi() {
    let server = server();
    let c = server.client().await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("h", "f", None),
    )
    .await;
    assert!(eventually(&server, |s| s.get("vmi", "vw", "h").is_some()).await);
    raw(
        &c,
        "PATCH",
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines/h",
        "application/merge-patch+json",
        Some(&json!({ "spec": { "runStrategy": "Halted" } })),
    )
    .await;
    assert!(
        eventually(&server, |s| s.get("vmi", "vw", "h").is_none()
            && printable(s, "vw", "h") == "Stopped")
        .await
    );
    assert_eq!(
        server.get("vm", "vw", "h").unwrap()["metadata"]["generation"],
        2
    );
}

/// The scheduler's taint filter: a VMI whose launcher tolerates no taint is placed only on
/// a node without `NoSchedule`/`NoExecute` taints (`PreferNoSchedule` does not filter) and
/// not marked `kubevirt.io/schedulable=false`; one tolerating the taint may go there.
#[tokio::test]
async fn vmis_are_scheduled_only_where_their_taints_are_tolerated() {
    let server = server();
    let node = |name: &str, effect: Option<&str>, label: Option<&str>| {
        let mut labels = json!({});
        if let Some(value) = label {
            labels["kubevirt.io/schedulable"] = json!(value);
        }
        let taints: Vec<Value> = effect
            .map(|e| json!({ "key": "node-role.kubernetes.io/control-plane", "effect": e }))
            .into_iter()
            .collect();
        json!({ "apiVersion": "v1", "kind": "Node",
                "metadata": { "name": name, "labels": labels },
                "spec": { "taints": taints },
                "status": { "allocatable": { "cpu": "8", "memory": "32Gi" } } })
    };
    server.insert(node("cp-a", Some("NoSchedule"), None));
    server.insert(node("cp-b", Some("NoExecute"), None));
    server.insert(node("handlerless", None, Some("false")));
    let c = server.client().await;
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &vm_json("plain", "f", None),
    )
    .await;
    let mut tolerant = vm_json("tolerant", "f", None);
    tolerant["spec"]["template"]["spec"]["tolerations"] = json!([
        { "key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule" }
    ]);
    post(
        &c,
        "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines",
        &tolerant,
    )
    .await;
    assert!(
        eventually(&server, |s| s
            .get("vmi", "vw", "tolerant")
            .is_some_and(|v| phase_of(&v) == "Running"))
        .await
    );
    let placed = |s: &FakeApiServer, name: &str| {
        s.get("vmi", "vw", name).and_then(|v| {
            v.pointer("/status/nodeName")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
    };
    assert_eq!(placed(&server, "tolerant").as_deref(), Some("cp-a"));
    // No node admits the plain VMI: it waits in Scheduling.
    assert!(
        eventually(&server, |s| s
            .get("vmi", "vw", "plain")
            .is_some_and(|v| phase_of(&v) == "Scheduling"))
        .await
    );
    assert_eq!(placed(&server, "plain"), None);
    // A node with only a PreferNoSchedule taint takes it.
    server.insert(node("worker", Some("PreferNoSchedule"), Some("true")));
    assert!(eventually(&server, |s| placed(s, "plain").as_deref() == Some("worker")).await);
}

// ----------------------------------------------------------- discovery and observation

#[tokio::test]
async fn discovery_and_the_kubevirt_switch() {
    let server = server();
    let c = server.client().await;
    let (_, apis) = get(&c, "/apis").await;
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        [
            "kubevirt.io",
            "cdi.kubevirt.io",
            "storage.k8s.io",
            "route.openshift.io",
            "apps",
            "batch",
            "rbac.authorization.k8s.io",
            "snapshot.storage.k8s.io",
            "example.com",
            "events.k8s.io",
            "metrics.k8s.io",
            "policy",
            "discovery.k8s.io",
            "authorization.k8s.io"
        ]
    );
    let (_, kv) = get(&c, "/apis/kubevirt.io/v1").await;
    assert_eq!(kv["kind"], "APIResourceList");
    assert!(
        kv["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "virtualmachines" && r["namespaced"] == true)
    );
    let (s, v) = get(&c, "/version").await;
    assert_eq!(s, 200);
    assert_eq!(v["major"], "1");
    // kube-rs discovery agrees.
    let discovery = kube::Discovery::new(c.clone()).run().await.unwrap();
    assert!(discovery.has_group("kubevirt.io") && discovery.has_group("cdi.kubevirt.io"));

    server.set_virtualization_installed(false);
    let (_, apis) = get(&c, "/apis").await;
    assert_eq!(
        apis["groups"].as_array().unwrap().len(),
        12,
        "all but kubevirt.io and cdi.kubevirt.io"
    );
    let (s, b) = get(&c, "/apis/kubevirt.io/v1").await;
    assert_eq!(s, 404);
    assert_status(&b, 404, "NotFound");
    let (s, _) = get(&c, "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines").await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn request_log_and_counters_record_every_request() {
    let server = server();
    let c = server.client().await;
    post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &secret_json("l", json!({})),
    )
    .await;
    get(&c, "/api/v1/namespaces/vw/secrets/l?x=1").await;
    get(&c, "/api/v1/namespaces/vw/secrets/missing").await;
    let log = server.request_log();
    let shapes: Vec<(&str, &str, &str, &str, u16)> = log
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.verb.as_str(),
                r.resource.as_str(),
                r.name.as_str(),
                r.status,
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [
            ("POST", "create", "secrets", "l", 201),
            ("GET", "get", "secrets", "l", 200),
            ("GET", "get", "secrets", "missing", 404)
        ]
    );
    assert_eq!(log[1].path, "/api/v1/namespaces/vw/secrets/l");
    assert_eq!(log[1].query, "x=1");
    assert_eq!(log[1].namespace, "vw");
    assert!(log.iter().all(|r| r.inflight_at_start >= 1));
    assert_eq!(server.count("get", "secrets"), 2);
    assert_eq!(server.count("create", "secrets"), 1);
    assert_eq!(server.count("delete", "secrets"), 0);
}

// ------------------------------------------------------------------------------ kubectl

fn kubectl_available() -> bool {
    let found = std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("VIRTWORK_REQUIRE_KUBECTL").as_deref() != Ok("1"),
            "kubectl required (VIRTWORK_REQUIRE_KUBECTL=1) but not found"
        );
        eprintln!("SKIP: kubectl not installed; kubectl fidelity test skipped");
    }
    found
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=20s")
        .args(args)
        .output()
        .expect("run kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn kubectl_creates_gets_watches_and_deletes_against_the_fixture() {
    if !kubectl_available() {
        return;
    }
    let server = FakeApiServer::start(Options {
        namespaces: vec!["vw".into()],
        ..Options::secure()
    });
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kc).unwrap();
    let manifest = dir.path().join("vm.json");
    std::fs::write(
        &manifest,
        serde_json::to_string(&vm_json("kc-vm", "fedora", None)).unwrap(),
    )
    .unwrap();

    // Watch first, so it sees the creation; a reader thread forwards its lines, and the
    // watch is stopped once it has shown the object (the timeout is only a hang guard).
    let mut watch = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kc)
        .args([
            "-n",
            "vw",
            "get",
            "vm",
            "--watch",
            "-o",
            "name",
            "--request-timeout=60s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let watch_out = watch.stdout.take().unwrap();
    let (line_tx, line_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(watch_out)
            .lines()
            .map_while(Result::ok)
        {
            if line_tx.send(line).is_err() {
                return;
            }
        }
    });
    assert!(server.wait_until(PATIENCE, |s| s.count("watch", "virtualmachines") >= 1));

    let (ok, out, err) = kubectl(
        &kc,
        &["-n", "vw", "create", "-f", manifest.to_str().unwrap()],
    );
    assert!(ok, "kubectl create failed: {err}");
    assert_eq!(out.trim(), "virtualmachine.kubevirt.io/kc-vm created");
    assert!(
        server
            .request_log()
            .iter()
            .any(|r| r.verb == "create" && r.query.contains("fieldValidation=Strict"))
    );

    let (ok, out, err) = kubectl(
        &kc,
        &[
            "-n",
            "vw",
            "get",
            "vm",
            "-l",
            "app in (demo),virtwork/run-id=r1",
            "-o",
            "name",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "virtualmachine.kubevirt.io/kc-vm");
    let (ok, out, _) = kubectl(
        &kc,
        &["-n", "vw", "get", "vm", "-l", "app!=demo", "-o", "name"],
    );
    assert!(ok);
    assert_eq!(out.trim(), "");
    assert!(server.wait_until(PATIENCE, |s| printable(s, "vw", "kc-vm") == "Running"));
    let (ok, out, err) = kubectl(&kc, &["-n", "vw", "get", "vm", "kc-vm"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .eq(["NAME", "STATUS", "READY", "AGE"]),
        "{out}"
    );
    assert!(out.contains("Running"), "{out}");
    let (ok, out, _) = kubectl(
        &kc,
        &[
            "-n",
            "vw",
            "get",
            "vmi",
            "kc-vm",
            "-o",
            "jsonpath={.status.phase}",
        ],
    );
    assert!(ok);
    assert_eq!(out, "Running");

    let (ok, out, err) = kubectl(&kc, &["-n", "vw", "delete", "vm", "kc-vm"]);
    assert!(ok, "{err}");
    assert!(out.contains("\"kc-vm\" deleted"), "{out}");
    let (ok, _, err) = kubectl(&kc, &["-n", "vw", "get", "vm", "kc-vm"]);
    assert!(!ok);
    assert!(
        err.contains("NotFound") && err.contains("virtualmachines.kubevirt.io \"kc-vm\" not found"),
        "{err}"
    );

    let mut watched = Vec::new();
    while !watched
        .iter()
        .any(|l| l == "virtualmachine.kubevirt.io/kc-vm")
    {
        match line_rx.recv_timeout(PATIENCE) {
            Ok(line) => watched.push(line),
            Err(_) => break,
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        watched
            .iter()
            .any(|l| l == "virtualmachine.kubevirt.io/kc-vm"),
        "watch output: {watched:?}"
    );
}

// ------------------------------------------------------------------ KubeVirt schema checks

#[tokio::test]
async fn unknown_kubevirt_fields_are_rejected_or_pruned() {
    let Some(validator) = support::apiserver::kubevirt_schema() else {
        return; // support::schema printed the skip notice (or panicked under VIRTWORK_REQUIRE_SCHEMA)
    };
    let server = server();
    let c = server.client_without_retries().await;
    let vms = "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines";
    assert_eq!(
        post(&c, vms, &vm_json("valid", "f", Some("s"))).await.0,
        201,
        "a well-formed VM passes"
    );

    let mut typo = vm_json("typo", "f", None);
    typo["spec"]["template"]["spec"]["volumes"][0]["cloudInitNoCloud"] =
        json!({ "userDataSecretRef": { "name": "x" } });
    let (s, b) = post(&c, vms, &typo).await;
    assert_eq!(s, 400, "{b}");
    assert_status(&b, 400, "BadRequest");
    assert_eq!(
        b["message"],
        "VirtualMachine in version \"v1\" cannot be handled as a VirtualMachine: strict decoding error: unknown field \"spec.template.spec.volumes[0].cloudInitNoCloud.userDataSecretRef\""
    );
    assert!(server.get("vm", "vw", "typo").is_none());

    let mut wrong_type = vm_json("wrong-type", "f", None);
    wrong_type["spec"]["runStrategy"] = json!(5);
    let (s, b) = post(&c, vms, &wrong_type).await;
    assert_eq!(s, 422, "{b}");
    assert_status(&b, 422, "Invalid");

    server.set_schema(Some(validator), support::SchemaMode::Warn);
    let (s, h, b) = raw(
        &c,
        "POST",
        vms,
        "application/json",
        Some(&{
            let mut v = vm_json("warned", "f", None);
            v["spec"]["bogus"] = json!(true);
            v
        }),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(h["warning"], "299 - \"unknown field \\\"spec.bogus\\\"\"");
    assert!(
        server.get("vm", "vw", "warned").unwrap()["spec"]
            .get("bogus")
            .is_none(),
        "pruned"
    );
    // An explicit fieldValidation=Strict wins over the Warn default.
    let (s, _) = post(&c, &format!("{vms}?fieldValidation=Strict"), &{
        let mut v = vm_json("strict", "f", None);
        v["spec"]["bogus"] = json!(true);
        v
    })
    .await;
    assert_eq!(s, 400);
    let paths: Vec<String> = server
        .schema_violations()
        .into_iter()
        .map(|v| v.path)
        .collect();
    assert!(
        paths.contains(
            &"spec.template.spec.volumes[0].cloudInitNoCloud.userDataSecretRef".to_string()
        )
    );
    assert!(paths.contains(&"spec.bogus".to_string()));
}

// ------------------------------------------------------------ more wire details and faults

#[tokio::test]
async fn generate_name_and_status_subresource() {
    let server = server();
    let c = server.client_without_retries().await;
    let (s, b) = post(
        &c,
        "/api/v1/namespaces/vw/secrets",
        &json!({ "metadata": { "generateName": "gen-" } }),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let name = b["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    assert!(server.get("secret", "vw", name).is_some());

    server.set_controllers(ControllerOptions {
        enabled: false,
        ..Default::default()
    });
    let vms = "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines";
    let mut vm = vm_json("st", "f", None);
    vm["status"] = json!({ "printableStatus": "Running" });
    let (_, created) = post(&c, vms, &vm).await;
    assert!(
        created.get("status").is_none(),
        "status is ignored on create"
    );
    let (s, _, b) = raw(
        &c,
        "PATCH",
        &format!("{vms}/st/status"),
        "application/merge-patch+json",
        Some(
            &json!({ "status": { "ready": true }, "metadata": { "labels": { "ignored": "yes" } } }),
        ),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["status"]["ready"], true);
    assert!(
        b["metadata"]["labels"].get("ignored").is_none(),
        "the status subresource changes only status"
    );
    assert_eq!(b["metadata"]["generation"], 1);
    let (_, _, b) = raw(
        &c,
        "PATCH",
        &format!("{vms}/st"),
        "application/merge-patch+json",
        Some(&json!({ "status": { "ready": false }, "spec": { "runStrategy": "Halted" } })),
    )
    .await;
    assert_eq!(
        b["status"]["ready"], true,
        "the main resource ignores status changes"
    );
    assert_eq!(b["metadata"]["generation"], 2);
}

#[tokio::test]
async fn latency_and_dropped_connections() {
    let server = server();
    let c = server.client_without_retries().await;
    server.set_faults(Faults {
        latency: Duration::from_millis(40),
        jitter: Duration::from_millis(20),
        ..Default::default()
    });
    for _ in 0..3 {
        assert_eq!(get(&c, "/api/v1/namespaces/vw/secrets").await.0, 200);
    }
    // Lower bounds only: the injected sleep happens before the answer.
    assert!(
        server
            .request_log()
            .iter()
            .all(|r| r.duration >= Duration::from_millis(40))
    );

    server.set_faults(Faults {
        drop_rate: 1.0,
        ..Default::default()
    });
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "vw");
    assert!(secrets.list(&ListParams::default()).await.is_err());
    let last = server.request_log().pop().unwrap();
    assert_eq!((last.verb.as_str(), last.status), ("list", 0));
    server.set_faults(Faults::default());
    assert!(
        secrets.list(&ListParams::default()).await.is_ok(),
        "the server recovers"
    );
}

#[tokio::test]
async fn kube_watcher_recovers_from_410_by_relisting() {
    let server = FakeApiServer::start(Options {
        namespaces: vec!["vw".into()],
        faults: Faults {
            watch_max_duration: Some(Duration::from_millis(100)),
            ..Default::default()
        },
        ..Default::default()
    });
    let client = server.client().await;
    let secrets: Api<Secret> = Api::namespaced(client, "vw");
    // Drive the watcher on its own task; report what it yields.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut stream =
            kube::runtime::watcher(secrets, kube::runtime::watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let label = match ev {
                Ok(kube::runtime::watcher::Event::InitDone) => "init-done".to_string(),
                Ok(
                    kube::runtime::watcher::Event::Apply(s)
                    | kube::runtime::watcher::Event::InitApply(s),
                ) => s.metadata.name.unwrap_or_default(),
                Ok(_) => continue,
                Err(e) => format!("error: {e}"),
            };
            if tx.send(label).is_err() {
                return;
            }
        }
    });
    while next_label(&mut rx).await != "init-done" {}
    let lists_before = server.count("list", "secrets");
    // Hold the next re-watch, and meanwhile change state and compact history under it.
    server.update_faults(|f| {
        f.scripted.push(ScriptedFault::new(
            "watch",
            "secrets",
            FaultAction::Delay(Duration::from_millis(500)),
        ))
    });
    assert!(eventually(&server, |s| s.faults().scripted[0].times == 0).await);
    let mut seeded = secret_json("after-compaction", json!({}));
    seeded["metadata"]["namespace"] = json!("vw");
    server.insert(seeded);
    server.compact();
    let mut seen = false;
    while !seen {
        seen = next_label(&mut rx).await == "after-compaction";
    }
    assert!(
        seen,
        "the watcher saw the object created while it was desynchronised"
    );
    assert!(
        server.count("list", "secrets") > lists_before,
        "it relisted after the 410"
    );
}

async fn next_label(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("watcher event")
        .expect("watcher running")
}

#[tokio::test]
async fn seeded_random_faults_replay_identically() {
    async fn statuses(seed: u64) -> Vec<u16> {
        let server = server();
        server.set_faults(Faults {
            error_rate: 0.3,
            error_codes: vec![500, 503],
            after_commit_rate: 0.3,
            after_commit: AfterCommit::Status(504),
            seed,
            ..Default::default()
        });
        let c = server.client_without_retries().await;
        let mut out = Vec::new();
        for i in 0..30 {
            out.push(
                post(
                    &c,
                    "/api/v1/namespaces/vw/secrets",
                    &secret_json(&format!("r{i}"), json!({})),
                )
                .await
                .0,
            );
        }
        // Whatever the client saw, the store holds exactly the committed writes.
        let committed = server.request_log().iter().filter(|r| r.committed).count();
        assert_eq!(server.objects("secrets", Some("vw")).len(), committed);
        out
    }
    let first = statuses(11).await;
    assert_eq!(first, statuses(11).await, "same seed, same faults");
    assert_ne!(first, statuses(12).await, "another seed, other faults");
    for code in [201, 500, 503, 504] {
        assert!(first.contains(&code), "{code} in {first:?}");
    }
}

/// KubeVirt's lifecycle subresources as virt-api answers them (202, or 409 with its
/// message), the VM controller's reaction (stop: Stopping then Stopped, VMI gone; start: a
/// new VMI; restart: a new VMI), and a live migration's phases and their mark on the VMI.
#[tokio::test]
async fn lifecycle_subresources_and_migrations_behave_like_kubevirt() {
    let server = server();
    let c = server.client().await;
    let vms = "/apis/kubevirt.io/v1/namespaces/vw/virtualmachines";
    let (s, _) = post(
        &c,
        vms,
        &vm_json("life", "quay.io/containerdisks/fedora:42", None),
    )
    .await;
    assert_eq!(s, 201);
    let vmi_phase = |s: &FakeApiServer| s.get("vmi", "vw", "life").map(|v| phase_of(&v));
    assert!(eventually(&server, |s| vmi_phase(s).as_deref() == Some("Running")).await);
    let uid = |s: &FakeApiServer| {
        s.get("vmi", "vw", "life")
            .map(|v| v["metadata"]["uid"].clone())
    };
    let first = uid(&server).unwrap();
    let sub = |action: &str| {
        format!("/apis/subresources.kubevirt.io/v1/namespaces/vw/virtualmachines/life/{action}")
    };
    let put = |action: String| {
        let c = c.clone();
        async move { raw(&c, "PUT", &action, "application/json", Some(&json!({}))).await }
    };

    let (s, _, body) = put(sub("start")).await;
    assert_eq!(s, 409);
    assert_status(&body, 409, "Conflict");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("VM is already running"),
        "{body}"
    );

    let (s, _, body) = put(sub("restart")).await;
    assert_eq!((s, body), (202, Value::String(String::new())));
    assert!(
        eventually(&server, |s| uid(s).is_some_and(|u| u != first)
            && vmi_phase(s).as_deref() == Some("Running"))
        .await,
        "restart gives a new running VMI"
    );

    // While a restart's requests are pending (its VMI still shutting down), another restart
    // is virt-api's 500 (pkg/virt-api/rest/lifecycle.go, getChangeRequestJson; formerly
    // subresource.go).
    server.set_controllers(ControllerOptions {
        stop_delay: Duration::from_millis(800),
        ..Default::default()
    });
    let second = uid(&server).unwrap();
    let (s, _, _) = put(sub("restart")).await;
    assert_eq!(s, 202);
    let pending = server.get("vm", "vw", "life").unwrap();
    assert_eq!(
        pending["status"]["stateChangeRequests"][0]["uid"], second,
        "{pending}"
    );
    let (s, _, body) = put(sub("restart")).await;
    assert_eq!(s, 500, "{body}");
    assert_status(&body, 500, "InternalError");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("unable to complete request: stop/start already underway"),
        "{body}"
    );
    assert!(
        eventually(&server, |s| uid(s).is_some_and(|u| u != second)
            && vmi_phase(s).as_deref() == Some("Running"))
        .await,
        "the pending restart gives a new running VMI"
    );
    let done = server.get("vm", "vw", "life").unwrap();
    assert!(done["status"]["stateChangeRequests"].is_null(), "{done}");
    server.set_controllers(ControllerOptions::default());

    let (s, _, _) = put(sub("stop")).await;
    assert_eq!(s, 202);
    let vm = server.get("vm", "vw", "life").unwrap();
    assert_eq!(vm["spec"]["runStrategy"], "Halted");
    assert!(eventually(&server, |s| printable(s, "vw", "life") == "Stopped").await);
    assert!(server.get("vmi", "vw", "life").is_none());
    let (s, _, body) = put(sub("stop")).await;
    assert_eq!(s, 409);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("VM is not running"),
        "{body}"
    );
    let (s, _, body) = put(sub("restart")).await;
    assert_eq!(s, 409, "{body}");

    let (s, _, _) = put(sub("start")).await;
    assert_eq!(s, 202);
    assert!(eventually(&server, |s| vmi_phase(s).as_deref() == Some("Running")).await);
    let (s, _, body) = put(sub("start")).await;
    assert_eq!(s, 409);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("VM is already running"),
        "{body}"
    );

    // A migration: Pending → Scheduling → Running → Succeeded, the VMI on another node.
    let node = server.get("vmi", "vw", "life").unwrap()["status"]["nodeName"].clone();
    let migrations = "/apis/kubevirt.io/v1/namespaces/vw/virtualmachineinstancemigrations";
    let (s, created) = post(
        &c,
        migrations,
        &json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": { "generateName": "m-" }, "spec": { "vmiName": "life" },
        }),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    let migration_phase = |s: &FakeApiServer| {
        s.get("vmim", "vw", &name)
            .map(|m| phase_of(&m))
            .unwrap_or_default()
    };
    assert!(eventually(&server, |s| migration_phase(s) == "Succeeded").await);
    let phases: Vec<String> = server
        .events()
        .iter()
        .filter(|e| e.name == name)
        .map(|e| phase_of(&e.object))
        .collect();
    assert_eq!(
        phases,
        [
            "",
            "Scheduling",
            "Scheduled",
            "PreparingTarget",
            "TargetReady",
            "Running",
            "Succeeded"
        ]
    );
    let vmi = server.get("vmi", "vw", "life").unwrap();
    let state = &vmi["status"]["migrationState"];
    assert_eq!(state["completed"], true);
    assert_eq!(state["sourceNode"], node);
    assert_eq!(vmi["status"]["nodeName"], state["targetNode"]);
    assert_ne!(vmi["status"]["nodeName"], node);

    // A migration of a VMI that does not run fails.
    let (_, orphan) = post(
        &c,
        migrations,
        &json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": { "name": "orphan" }, "spec": { "vmiName": "nothing" },
        }),
    )
    .await;
    assert_eq!(orphan["metadata"]["name"], "orphan");
    assert!(
        eventually(&server, |s| s
            .get("vmim", "vw", "orphan")
            .map(|m| phase_of(&m))
            == Some("Failed".into()))
        .await
    );
}
