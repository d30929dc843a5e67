//! A QEMU guest agent client over the unix socket of a virtio-serial port: `guest-sync-delimited`
//! to frame the conversation, `guest-exec` and `guest-exec-status` to run commands (the same
//! path KubeVirt's exec readiness probes take).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

pub struct Qga {
    path: PathBuf,
    stream: Option<BufReader<UnixStream>>,
    next_id: u64,
}

/// What a command run through guest-exec left behind.
#[derive(Debug, Clone)]
pub struct ExecResult {
    pub code: i64,
    pub stdout: String,
    pub stderr: String,
}

impl Qga {
    pub fn new(path: PathBuf) -> Qga {
        Qga {
            path,
            stream: None,
            next_id: 1000,
        }
    }

    /// Connects (when needed) and synchronises: anything the agent still had queued from an
    /// earlier, timed-out exchange is skipped up to the 0xFF the agent sends before its answer.
    pub fn sync(&mut self, timeout: Duration) -> Result<(), String> {
        if self.stream.is_none() {
            let stream = UnixStream::connect(&self.path).map_err(|e| format!("connect: {e}"))?;
            self.stream = Some(BufReader::new(stream));
        }
        self.next_id += 1;
        let id = self.next_id;
        let result = self.sync_once(id, timeout);
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    fn sync_once(&mut self, id: u64, timeout: Duration) -> Result<(), String> {
        let reader = self.stream.as_mut().unwrap();
        reader.get_ref().set_read_timeout(Some(timeout)).unwrap();
        let request = json!({"execute": "guest-sync-delimited", "arguments": {"id": id}});
        reader
            .get_mut()
            .write_all(format!("{request}\n").as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let deadline = Instant::now() + timeout;
        loop {
            let mut byte = [0u8; 1];
            // Skip to the delimiter.
            loop {
                reader
                    .read_exact(&mut byte)
                    .map_err(|e| format!("sync: {e}"))?;
                if byte[0] == 0xff {
                    break;
                }
            }
            let mut line = String::new();
            reader
                .read_line(&mut line)
                .map_err(|e| format!("sync: {e}"))?;
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && value["return"] == json!(id)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("sync: no matching answer".to_string());
            }
        }
    }

    fn call(&mut self, request: Value, timeout: Duration) -> Result<Value, String> {
        self.sync(Duration::from_secs(5))?;
        let reader = self.stream.as_mut().unwrap();
        reader.get_ref().set_read_timeout(Some(timeout)).unwrap();
        let sent = reader
            .get_mut()
            .write_all(format!("{request}\n").as_bytes());
        let mut line = String::new();
        let answer = sent
            .map_err(|e| e.to_string())
            .and_then(|_| reader.read_line(&mut line).map_err(|e| e.to_string()));
        if let Err(e) = answer {
            self.stream = None;
            return Err(format!("{}: {e}", request["execute"]));
        }
        let value: Value = serde_json::from_str(line.trim_start_matches('\u{ff}'))
            .map_err(|e| format!("answer {line:?}: {e}"))?;
        if let Some(error) = value.get("error") {
            return Err(format!("{}: {error}", request["execute"]));
        }
        Ok(value["return"].clone())
    }

    /// Runs `argv` in the guest and waits for it to exit.
    pub fn exec(&mut self, argv: &[&str], timeout: Duration) -> Result<ExecResult, String> {
        let started = self.call(
            json!({"execute": "guest-exec", "arguments": {
                "path": argv[0], "arg": &argv[1..], "capture-output": true}}),
            Duration::from_secs(10),
        )?;
        let pid = started["pid"]
            .as_i64()
            .ok_or("guest-exec returned no pid")?;
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.call(
                json!({"execute": "guest-exec-status", "arguments": {"pid": pid}}),
                Duration::from_secs(10),
            )?;
            if status["exited"] == json!(true) {
                let decode = |key: &str| {
                    status[key]
                        .as_str()
                        .map(|b| {
                            String::from_utf8_lossy(
                                &base64::engine::general_purpose::STANDARD
                                    .decode(b)
                                    .unwrap_or_default(),
                            )
                            .into_owned()
                        })
                        .unwrap_or_default()
                };
                return Ok(ExecResult {
                    code: status["exitcode"]
                        .as_i64()
                        .or_else(|| status["signal"].as_i64().map(|s| 128 + s))
                        .unwrap_or(-1),
                    stdout: decode("out-data"),
                    stderr: decode("err-data"),
                });
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{argv:?} still running after {}s",
                    timeout.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}
