//! A small forward proxy for tests: `CONNECT host:port` tunnels (what kube's client and kubectl
//! use for every scheme) and plain absolute-form HTTP requests, all forwarded to one upstream
//! address whatever host the client named, so a test can give the API server a name that only
//! the proxy "resolves". It records each request's target and `Proxy-Authorization` header.
//! Threads only; it serves until the test process ends.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request the proxy received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedRequest {
    /// `CONNECT` or the HTTP method of an absolute-form request.
    pub method: String,
    /// `host:port` of a CONNECT, the absolute URL otherwise.
    pub target: String,
    /// The `Proxy-Authorization` header, if sent.
    pub authorization: Option<String>,
}

pub struct CountingProxy {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<ProxiedRequest>>>,
}

impl CountingProxy {
    /// Starts a proxy on 127.0.0.1 forwarding every connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let _ = serve(client, upstream, &seen);
                });
            }
        });
        CountingProxy { addr, requests }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<ProxiedRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    seen: &Mutex<Vec<ProxiedRequest>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let end = line == "\r\n" || line == "\n";
        head.push(line);
        if end {
            break;
        }
    }
    let mut first = head[0].split_whitespace();
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let authorization = head.iter().find_map(|h| {
        let (name, value) = h.split_once(':')?;
        name.eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim().to_string())
    });
    seen.lock().unwrap().push(ProxiedRequest {
        method: method.clone(),
        target,
        authorization,
    });
    let mut server = TcpStream::connect(upstream)?;
    let mut client = client;
    if method == "CONNECT" {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    } else {
        // Absolute-form request: the fake API server reads the path from it as it is.
        for line in &head {
            server.write_all(line.as_bytes())?;
        }
    }
    // Whatever the reader buffered beyond the head belongs to the tunnel.
    let buffered = reader.buffer().to_vec();
    server.write_all(&buffered)?;
    let mut client_read = client.try_clone()?;
    let mut server_write = server.try_clone()?;
    let upload = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut server_write);
        let _ = server_write.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(std::net::Shutdown::Write);
    let _ = upload.join();
    Ok(())
}
