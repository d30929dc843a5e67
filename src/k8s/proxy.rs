//! Which HTTP(S) proxy, if any, carries the API requests: the kubeconfig cluster's `proxy-url`,
//! else `HTTPS_PROXY`/`HTTP_PROXY` minus `NO_PROXY`, decided exactly as kubectl (client-go and
//! Go's `net/http` proxy rules) decides, so a setup that works with kubectl works here.
//!
//! Sans-IO: [`choose_proxy`] takes the target URL, the kubeconfig value and a snapshot of the
//! environment ([`ProxyEnv`]) and returns the proxy to use; client.rs hands it to kube's
//! tunnelling connector. Proxy URLs can carry credentials (`http://user:password@host`):
//! everything shown to a user goes through [`redact_userinfo`]. Must not: print a proxy URL
//! unredacted, or consult anything but its arguments.

use std::net::IpAddr;

/// The proxy variables as the process sees them (upper case wins over lower case, empty values
/// count as unset, as in Go).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    pub https_proxy: Option<(String, &'static str)>,
    pub http_proxy: Option<(String, &'static str)>,
    pub no_proxy: Option<String>,
}

impl ProxyEnv {
    /// Reads `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY` and their lower-case forms through `get`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let any = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|n| get(n).filter(|v| !v.trim().is_empty()).map(|v| (v, n)))
        };
        ProxyEnv {
            https_proxy: any(["HTTPS_PROXY", "https_proxy"]),
            http_proxy: any(["HTTP_PROXY", "http_proxy"]),
            no_proxy: any(["NO_PROXY", "no_proxy"]).map(|(v, _)| v),
        }
    }

    /// The process environment.
    pub fn from_process() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }
}

/// Where the chosen proxy came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxySource {
    /// The cluster's `proxy-url` in the kubeconfig.
    Kubeconfig,
    /// An environment variable (its name as set).
    Env(&'static str),
}

/// The proxy every request goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenProxy {
    /// With any userinfo: kube sends it as `Proxy-Authorization: Basic`.
    pub uri: http::Uri,
    pub source: ProxySource,
}

impl std::fmt::Display for ChosenProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = match &self.source {
            ProxySource::Kubeconfig => "proxy-url in the kubeconfig",
            ProxySource::Env(name) => name,
        };
        write!(
            f,
            "via proxy {} from {from}",
            redact_userinfo(&self.uri.to_string())
        )
    }
}

/// `scheme://user:password@host:port/...` → `scheme://***@host:port/...`; anything without
/// userinfo is returned unchanged. Works on unparsable input too (a bad value is still shown
/// safely in the error about it).
pub fn redact_userinfo(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}***@{}{tail}", &authority[at + 1..]),
        None => url.to_string(),
    }
}

/// Parses a proxy URL as Go does: a value without a scheme means `http://`; kube can tunnel
/// through `http`, `https` and `socks5` proxies.
fn parse_proxy(value: &str, what: &str) -> Result<http::Uri, String> {
    let value = value.trim();
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    };
    let shown = redact_userinfo(&with_scheme);
    let uri: http::Uri = with_scheme.parse().map_err(|_| {
        format!("{what} ({shown}) is not a URL: expected e.g. http://proxy.example.com:3128")
    })?;
    match uri.scheme_str() {
        Some("http" | "https" | "socks5") if uri.host().is_some_and(|h| !h.is_empty()) => Ok(uri),
        Some("http" | "https" | "socks5") => Err(format!("{what} ({shown}) names no host")),
        _ => Err(format!(
            "{what} ({shown}) has an unsupported scheme: expected http://, https:// or socks5://"
        )),
    }
}

/// Decides the proxy for requests to `target` (the API server URL):
/// 1. the kubeconfig cluster's `proxy-url` when set (client-go uses it for every request,
///    without looking at `NO_PROXY`);
/// 2. else `HTTPS_PROXY` for an `https` server, `HTTP_PROXY` for an `http` one, unless
///    `NO_PROXY` matches the server or the server is `localhost`/a loopback address (Go's
///    `net/http` never proxies those).
///
/// The error names the setting and shows its value with any userinfo redacted.
pub fn choose_proxy(
    target: &http::Uri,
    kubeconfig_proxy: Option<&str>,
    env: &ProxyEnv,
) -> Result<Option<ChosenProxy>, String> {
    if let Some(value) = kubeconfig_proxy.filter(|v| !v.trim().is_empty()) {
        let uri = parse_proxy(value, "proxy-url in the kubeconfig")?;
        return Ok(Some(ChosenProxy {
            uri,
            source: ProxySource::Kubeconfig,
        }));
    }
    let https = target.scheme_str() == Some("https");
    let Some((value, name)) = (if https {
        &env.https_proxy
    } else {
        &env.http_proxy
    }) else {
        return Ok(None);
    };
    let uri = parse_proxy(value, name)?;
    let Some(host) = target.host() else {
        return Ok(None);
    };
    let port = target.port_u16().unwrap_or(if https { 443 } else { 80 });
    let no_proxy = NoProxy::parse(env.no_proxy.as_deref().unwrap_or(""));
    if !no_proxy.use_proxy(host, port) {
        return Ok(None);
    }
    Ok(Some(ChosenProxy {
        uri,
        source: ProxySource::Env(name),
    }))
}

/// `NO_PROXY` as Go's `httpproxy` reads it: comma-separated entries, each `*` (everything),
/// an IP (optionally with `:port`), a CIDR range, or a domain (`example.com` matches it and
/// its subdomains, `.example.com` and `*.example.com` only subdomains), optionally with
/// `:port`. Malformed entries are ignored, never an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoProxy {
    all: bool,
    ips: Vec<(IpAddr, Option<u16>)>,
    cidrs: Vec<(IpAddr, u8)>,
    /// (".example.com", port, whether the bare "example.com" matches too)
    domains: Vec<(String, Option<u16>, bool)>,
}

impl NoProxy {
    pub fn parse(value: &str) -> Self {
        let mut parsed = NoProxy::default();
        for entry in value.split(',') {
            let entry = entry.trim().to_ascii_lowercase();
            if entry.is_empty() {
                continue;
            }
            if entry == "*" {
                parsed.all = true;
                return parsed;
            }
            if let Some(cidr) = parse_cidr(&entry) {
                parsed.cidrs.push(cidr);
                continue;
            }
            let (host, port) = split_host_port(&entry);
            if host.is_empty() || port == Some(None) {
                continue;
            }
            let port = port.flatten();
            if let Ok(ip) = host.parse::<IpAddr>() {
                parsed.ips.push((ip, port));
                continue;
            }
            let host = host.strip_prefix('*').unwrap_or(host);
            let (domain, bare) = match host.strip_prefix('.') {
                Some(_) => (host.to_string(), false),
                None => (format!(".{host}"), true),
            };
            if domain.len() > 1 {
                parsed.domains.push((domain, port, bare));
            }
        }
        parsed
    }

    /// Whether a request to `host:port` goes through the proxy.
    pub fn use_proxy(&self, host: &str, port: u16) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host == "localhost" {
            return false;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            if ip.is_loopback() || self.all {
                return false;
            }
            if self
                .ips
                .iter()
                .any(|(m, p)| *m == ip && p.is_none_or(|p| p == port))
            {
                return false;
            }
            if self
                .cidrs
                .iter()
                .any(|(net, bits)| cidr_contains(*net, *bits, ip))
            {
                return false;
            }
        }
        if self.all {
            return false;
        }
        !self.domains.iter().any(|(domain, p, bare)| {
            (host.ends_with(domain.as_str()) || (*bare && host == domain[1..]))
                && p.is_none_or(|p| p == port)
        })
    }
}

/// `host:port` → (host, Some(Some(port))); `host` → (host, None); `host:junk` →
/// (host, Some(None)). IPv6 literals are accepted bracketed (`[::1]:80`) or bare.
fn split_host_port(entry: &str) -> (&str, Option<Option<u16>>) {
    if let Some(rest) = entry.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, port)) => match port.strip_prefix(':') {
                Some(p) => (host, Some(p.parse().ok())),
                None => (host, Some(None)),
            },
            None => ("", None),
        };
    }
    if entry.matches(':').count() > 1 {
        return (entry, None); // a bare IPv6 address
    }
    match entry.split_once(':') {
        Some((host, port)) => (host, Some(port.parse().ok())),
        None => (entry, None),
    }
}

fn parse_cidr(entry: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = entry.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

fn cidr_contains(net: IpAddr, bits: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(https: Option<&str>, http: Option<&str>, no_proxy: Option<&str>) -> ProxyEnv {
        ProxyEnv {
            https_proxy: https.map(|v| (v.to_string(), "HTTPS_PROXY")),
            http_proxy: http.map(|v| (v.to_string(), "HTTP_PROXY")),
            no_proxy: no_proxy.map(String::from),
        }
    }

    fn chosen(target: &str, kubeconfig: Option<&str>, env: &ProxyEnv) -> Option<String> {
        choose_proxy(&target.parse().unwrap(), kubeconfig, env)
            .unwrap()
            .map(|p| p.uri.to_string())
    }

    #[test]
    fn the_scheme_of_the_server_picks_the_variable() {
        let e = env(Some("http://s:1"), Some("http://p:2"), None);
        assert_eq!(
            chosen("https://api.example.com:6443", None, &e).as_deref(),
            Some("http://s:1/")
        );
        assert_eq!(
            chosen("http://api.example.com:8080", None, &e).as_deref(),
            Some("http://p:2/")
        );
        // No fallback from HTTPS_PROXY to HTTP_PROXY, as in Go.
        let only_http = env(None, Some("http://p:2"), None);
        assert_eq!(chosen("https://api.example.com", None, &only_http), None);
    }

    #[test]
    fn the_kubeconfig_proxy_url_wins_and_ignores_no_proxy() {
        let e = env(Some("http://s:1"), None, Some("*"));
        assert_eq!(
            chosen("https://127.0.0.1:6443", Some("socks5://k:3"), &e).as_deref(),
            Some("socks5://k:3/")
        );
    }

    #[test]
    fn loopback_and_no_proxy_matches_bypass_the_proxy() {
        let e = env(
            Some("proxy.corp:3128"),
            None,
            Some(" .svc , example.org:6443,10.0.0.0/8,192.168.1.5,[::2]:443,,bad:port:x"),
        );
        for bypassed in [
            "https://localhost:6443",
            "https://127.0.0.1:6443",
            "https://[::1]:6443",
            "https://kubernetes.default.svc",
            "https://example.org:6443",
            "https://api.example.org:6443",
            "https://10.1.2.3:6443",
            "https://192.168.1.5:6443",
            "https://[::2]",
        ] {
            assert_eq!(chosen(bypassed, None, &e), None, "{bypassed}");
        }
        for proxied in [
            "https://svc:6443",
            "https://example.org:443",
            "https://11.0.0.1:6443",
            "https://192.168.1.6",
            "https://api.example.com",
        ] {
            assert_eq!(
                chosen(proxied, None, &e).as_deref(),
                Some("http://proxy.corp:3128/"),
                "{proxied}"
            );
        }
        assert_eq!(
            chosen("https://anything", None, &env(Some("p:1"), None, Some("*"))),
            None
        );
        // "*.example.com" and ".example.com" match subdomains only; "example.com" the host too.
        let sub = NoProxy::parse("*.example.com");
        assert!(!sub.use_proxy("a.example.com", 443));
        assert!(sub.use_proxy("example.com", 443));
        assert!(!NoProxy::parse("example.com").use_proxy("example.com", 443));
    }

    #[test]
    fn bad_proxy_values_are_named_without_their_credentials() {
        let e = env(Some("ftp://alice:s3cret@proxy:21"), None, None);
        let err = choose_proxy(&"https://api:6443".parse().unwrap(), None, &e).unwrap_err();
        assert!(
            err.contains("HTTPS_PROXY") && err.contains("ftp://***@proxy:21"),
            "{err}"
        );
        assert!(!err.contains("s3cret") && !err.contains("alice"), "{err}");
        let err = choose_proxy(
            &"https://api".parse().unwrap(),
            Some("http://u:p w@x y"),
            &e,
        )
        .unwrap_err();
        assert!(
            err.contains("proxy-url in the kubeconfig") && !err.contains("p w"),
            "{err}"
        );
    }

    #[test]
    fn userinfo_is_redacted_wherever_it_appears() {
        assert_eq!(
            redact_userinfo("http://user:pa%40ss@proxy:3128/x?y"),
            "http://***@proxy:3128/x?y"
        );
        assert_eq!(redact_userinfo("user:pw@proxy:3128"), "***@proxy:3128");
        assert_eq!(redact_userinfo("http://proxy:3128"), "http://proxy:3128");
        let chosen = ChosenProxy {
            uri: "http://bob:hunter2@proxy:3128".parse().unwrap(),
            source: ProxySource::Env("https_proxy"),
        };
        assert_eq!(
            chosen.to_string(),
            "via proxy http://***@proxy:3128/ from https_proxy"
        );
    }

    #[test]
    fn upper_case_variables_win_and_empty_ones_are_unset() {
        let vars = [
            ("HTTPS_PROXY", ""),
            ("https_proxy", "http://lower:1"),
            ("HTTP_PROXY", "http://upper:2"),
            ("http_proxy", "http://lower:2"),
            ("no_proxy", "a"),
        ];
        let e = ProxyEnv::from_lookup(|n| {
            vars.iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        });
        assert_eq!(
            e.https_proxy,
            Some(("http://lower:1".into(), "https_proxy"))
        );
        assert_eq!(e.http_proxy, Some(("http://upper:2".into(), "HTTP_PROXY")));
        assert_eq!(e.no_proxy.as_deref(), Some("a"));
    }
}
