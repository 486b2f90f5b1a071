//! A server that answers every request at once with ten fixed hits: what the client alone can
//! drive, so a served figure can say whether the client or the server limited it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

const BODY: &str = r#"{"results":[{"id":0,"distance":0.0},{"id":1,"distance":1.0},{"id":2,"distance":2.0},{"id":3,"distance":3.0},{"id":4,"distance":4.0},{"id":5,"distance":5.0},{"id":6,"distance":6.0},{"id":7,"distance":7.0},{"id":8,"distance":8.0},{"id":9,"distance":9.0}]}"#;

pub struct NullServer {
    port: u16,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl NullServer {
    /// Listens on 127.0.0.1:`port` (0: any free port).
    pub fn start(port: u16) -> std::io::Result<NullServer> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (stop2, conns2) = (stop.clone(), conns.clone());
        let acceptor = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::Acquire) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let _ = stream.set_nodelay(true);
                if let Ok(c) = stream.try_clone() {
                    conns2.lock().unwrap_or_else(|p| p.into_inner()).push(c);
                }
                std::thread::spawn(move || serve(stream));
            }
        });
        Ok(NullServer {
            port,
            stop,
            conns,
            acceptor: Some(acceptor),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops accepting and closes every connection.
    pub fn stop(&mut self) {
        if self.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wakes the acceptor, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for c in self.conns.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for NullServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Answers requests on one kept-alive connection until the peer closes it.
fn serve(stream: TcpStream) {
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut length = 0usize;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, value)) = l.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        body.resize(length, 0);
        if reader.read_exact(&mut body).is_err() || out.write_all(head.as_bytes()).is_err() {
            return;
        }
    }
}
