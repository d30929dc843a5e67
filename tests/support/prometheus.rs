//! A real Prometheus (Debian's `prometheus` package) for tests: started on a free port of
//! 127.0.0.1 with a temporary TSDB, scraping given targets every second, stopped (its own
//! child process, by handle) on drop. `promtool` comes with the package.
//!
//! Tests call [`tool`] first: it returns None (the test prints a SKIP notice and passes)
//! when the binary is absent, and panics instead under `VIRTWORK_REQUIRE_PROMETHEUS=1`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `prometheus` or `promtool` on PATH, or None (skip) when absent and not required.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("VIRTWORK_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "{name} is required (VIRTWORK_REQUIRE_PROMETHEUS=1): apt-get install prometheus"
        );
        eprintln!("SKIP: {name} not installed (apt-get install prometheus)");
    }
    found
}

/// One scrape job: `http://<address><path>` every second, optionally with a bearer token.
pub struct ScrapeJob {
    pub name: String,
    pub address: String,
    pub path: String,
    pub bearer: Option<String>,
}

pub struct Prometheus {
    child: Child,
    pub url: String,
    pub port: u16,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Prometheus {
    /// Starts `binary` scraping `jobs` every second and waits until it is ready.
    pub fn start(binary: &PathBuf, jobs: &[ScrapeJob]) -> Prometheus {
        Prometheus::start_with_rules(binary, jobs, None)
    }

    /// Like [`Prometheus::start`], also evaluating the rule file `rules` (YAML) every second.
    pub fn start_with_rules(
        binary: &PathBuf,
        jobs: &[ScrapeJob],
        rules: Option<&str>,
    ) -> Prometheus {
        Prometheus::start_with_evaluation(binary, jobs, rules, 1)
    }

    /// Like [`Prometheus::start_with_rules`] with the global evaluation interval at
    /// `evaluation_secs` (30 on kube-prometheus and OpenShift): also the default step of a
    /// subquery that names none.
    pub fn start_with_evaluation(
        binary: &PathBuf,
        jobs: &[ScrapeJob],
        rules: Option<&str>,
        evaluation_secs: u64,
    ) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let mut config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: {evaluation_secs}s\n",
        );
        if let Some(rules) = rules {
            let path = dir.path().join("rules.yml");
            std::fs::write(&path, rules).unwrap();
            config.push_str(&format!("rule_files:\n  - '{}'\n", path.display()));
        }
        config.push_str("scrape_configs:\n");
        for job in jobs {
            config.push_str(&format!(
                "  - job_name: {}\n    honor_labels: true\n    metrics_path: '{}'\n    scheme: http\n    static_configs:\n      - targets: ['{}']\n",
                job.name, job.path, job.address
            ));
            if let Some(token) = &job.bearer {
                config.push_str(&format!(
                    "    authorization:\n      credentials: '{token}'\n"
                ));
            }
        }
        Prometheus::spawn(binary, dir, &config)
    }

    /// A Prometheus without scrape jobs whose storage holds the samples of `openmetrics`
    /// (an OpenMetrics file, timestamps in seconds), written into blocks by `promtool tsdb
    /// create-blocks-from openmetrics` before it starts: history a test cannot wait for.
    pub fn start_with_history(
        binary: &PathBuf,
        promtool: &PathBuf,
        openmetrics: &std::path::Path,
    ) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(openmetrics)
            .arg(dir.path().join("data"))
            .output()
            .expect("run promtool");
        assert!(
            out.status.success(),
            "promtool: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let config = "global:\n  scrape_interval: 30s\n  evaluation_interval: 30s\n".to_string();
        Prometheus::spawn(binary, dir, &config)
    }

    fn spawn(binary: &PathBuf, dir: tempfile::TempDir, config: &str) -> Prometheus {
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if prometheus
                .get("/-/ready")
                .is_some_and(|(code, _)| code == 200)
            {
                return prometheus;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("prometheus did not become ready:\n{}", prometheus.log());
    }

    /// Prometheus' own log (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// A plain HTTP/1.0 GET on Prometheus: (status, body), None when unreachable.
    pub fn get(&self, path_and_query: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        write!(
            stream,
            "GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
        )
        .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let code = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((code, body))
    }

    /// Waits until an instant query returns at least `series` results (hang guard only).
    pub fn wait_for_series(&self, promql: &str, series: usize, timeout: Duration) -> bool {
        self.wait_for_results(promql, timeout, |n| n >= series)
    }

    /// Waits until an instant query returns no result (hang guard only).
    pub fn wait_for_none(&self, promql: &str, timeout: Duration) -> bool {
        self.wait_for_results(promql, timeout, |n| n == 0)
    }

    fn wait_for_results(
        &self,
        promql: &str,
        timeout: Duration,
        done: impl Fn(usize) -> bool,
    ) -> bool {
        let encoded: String = promql
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some((200, body)) = self.get(&format!("/api/v1/query?query={encoded}")) {
                let doc: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                if doc["data"]["result"]
                    .as_array()
                    .is_some_and(|r| done(r.len()))
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
