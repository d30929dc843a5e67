//! TLS for the fake server (a fresh self-signed CA and a 127.0.0.1/localhost server
//! certificate per server, via rcgen and rustls with ring) and the kubeconfig that points
//! kubectl or the virtwork binary at it.

use std::sync::Arc;

use base64::Engine;
use tokio_rustls::rustls;

/// The CA certificate clients must trust and the acceptor serving the leaf certificate.
pub struct TlsMaterial {
    pub ca_pem: String,
    pub acceptor: tokio_rustls::TlsAcceptor,
}

pub fn generate() -> TlsMaterial {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
        SanType,
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "virtwork fake apiserver CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA cert");

    let leaf_key = KeyPair::generate().expect("leaf key");
    let mut leaf_params =
        CertificateParams::new(vec!["localhost".to_string()]).expect("leaf params");
    leaf_params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let leaf = leaf_params
        .signed_by(&leaf_key, &issuer)
        .expect("leaf cert");

    let chain = vec![leaf.der().clone(), ca_cert.der().clone()];
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server cert");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsMaterial {
        ca_pem: ca_cert.pem(),
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    }
}

/// A kubeconfig with one cluster/user/context named `fake`.
pub fn kubeconfig(
    url: &str,
    ca_pem: Option<&str>,
    token: Option<&str>,
    namespace: Option<&str>,
) -> String {
    let mut cluster = serde_yaml::Mapping::new();
    cluster.insert("server".into(), url.into());
    if let Some(ca) = ca_pem {
        let data = base64::engine::general_purpose::STANDARD.encode(ca);
        cluster.insert("certificate-authority-data".into(), data.into());
    }
    let mut user = serde_yaml::Mapping::new();
    if let Some(t) = token {
        user.insert("token".into(), t.into());
    }
    let mut context = serde_yaml::Mapping::new();
    context.insert("cluster".into(), "fake".into());
    context.insert("user".into(), "fake".into());
    if let Some(ns) = namespace {
        context.insert("namespace".into(), ns.into());
    }
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "fake", "cluster": cluster }],
        "users": [{ "name": "fake", "user": user }],
        "contexts": [{ "name": "fake", "context": context }],
        "current-context": "fake",
        "preferences": {},
    });
    serde_yaml::to_string(&doc).unwrap()
}
