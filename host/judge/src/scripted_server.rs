//! A scripted OpenAI-compatible server on a local port, for tests of
//! judge-backed rubrics without a model: each request is recorded and
//! answered by the test's function of (request number, body). Plain
//! threads and `std::net`; one connection per request. It can also play a
//! hostile server (an endless body, a redirect elsewhere) for tests of
//! what the client refuses.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One reply.
pub enum Reply {
    /// 200 with this body.
    Ok(Vec<u8>),
    /// Another status, with an optional `Retry-After` (seconds).
    Status(u16, Option<u32>),
    /// Wait, then reply.
    After(Duration, Box<Reply>),
    /// 307 to this location (absolute, or a path on this server).
    Redirect(String),
    /// 200 with a body that never ends, written until the client hangs
    /// up; with a declared `content-length` when given (one it never
    /// reaches), else delimited by the connection's close.
    Flood(Option<u64>),
}

/// A chat-completions answer with `content`, usage and one logprob token.
pub fn completion(content: &str) -> Reply {
    Reply::Ok(
        serde_json::json!({
            "model": "tiny-judge",
            "choices": [{
                "message": {"role": "assistant", "content": content},
                "logprobs": {"content": [{"token": "YES", "logprob": -0.1,
                    "top_logprobs": [{"token": "YES", "logprob": -0.1}, {"token": "NO", "logprob": -2.4}]}]},
            }],
            "usage": {"prompt_tokens": 30, "completion_tokens": 5,
                      "prompt_tokens_details": {"cached_tokens": 10}},
        })
        .to_string()
        .into_bytes(),
    )
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request line and headers.
    pub head: String,
    /// The JSON body (`null` when it was not JSON).
    pub body: serde_json::Value,
}

/// The running server.
pub struct Server {
    /// The API root to configure as `base_url`.
    pub url: String,
    /// Every request so far, in arrival order.
    pub received: Arc<Mutex<Vec<Received>>>,
    /// The most requests that were open at once.
    pub in_flight_max: Arc<AtomicUsize>,
    /// Body bytes of [`Reply::Flood`] answers written so far: the most a
    /// client can have read of them.
    pub flood_bytes_written: Arc<AtomicU64>,
}

type Script = dyn Fn(usize, &serde_json::Value) -> Reply + Send + Sync;

/// Serves until the process ends (a thread per connection).
pub fn serve(
    script: impl Fn(usize, &serde_json::Value) -> Reply + Send + Sync + 'static,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let in_flight_max = Arc::new(AtomicUsize::new(0));
    let script: Arc<Script> = Arc::new(script);
    let counter = Arc::new(AtomicUsize::new(0));
    let flood_bytes_written = Arc::new(AtomicU64::new(0));
    {
        let received = received.clone();
        let in_flight_max = in_flight_max.clone();
        let flooded = flood_bytes_written.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (received, script, counter) =
                    (received.clone(), script.clone(), counter.clone());
                let (in_flight, in_flight_max) = (in_flight.clone(), in_flight_max.clone());
                let flooded = flooded.clone();
                std::thread::spawn(move || {
                    let requests = InFlight {
                        now: &in_flight,
                        max: &in_flight_max,
                    };
                    handle(stream, &received, &*script, &counter, requests, &flooded);
                });
            }
        });
    }
    Server {
        url,
        received,
        in_flight_max,
        flood_bytes_written,
    }
}

/// Requests the server holds: counted from a whole request read until its
/// answer starts to be written, so a client that sends its next request the
/// moment it has an answer is never counted twice.
struct InFlight<'a> {
    now: &'a AtomicUsize,
    max: &'a AtomicUsize,
}

impl InFlight<'_> {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

fn handle(
    stream: TcpStream,
    received: &Mutex<Vec<Received>>,
    script: &Script,
    counter: &AtomicUsize,
    requests: InFlight<'_>,
    flooded: &AtomicU64,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    requests.enter();
    let n = counter.fetch_add(1, Ordering::SeqCst);
    received.lock().unwrap().push(Received {
        head,
        body: body.clone(),
    });
    let mut reply = script(n, &body);
    let mut stream = stream;
    loop {
        match reply {
            Reply::After(wait, next) => {
                std::thread::sleep(wait);
                reply = *next;
            }
            Reply::Ok(bytes) => {
                requests.leave();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    bytes.len()
                );
                let _ = stream.write_all(&bytes);
                return;
            }
            Reply::Status(code, retry_after) => {
                requests.leave();
                let retry = retry_after.map_or(String::new(), |s| format!("retry-after: {s}\r\n"));
                let body = format!("{{\"error\": \"status {code}\"}}");
                let _ = write!(
                    stream,
                    "HTTP/1.1 {code} X\r\n{retry}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                return;
            }
            Reply::Redirect(location) => {
                requests.leave();
                let _ = write!(
                    stream,
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                return;
            }
            Reply::Flood(declared_length) => {
                requests.leave();
                flood(stream, declared_length, flooded);
                return;
            }
        }
    }
}

/// Writes a JSON-looking answer that never ends until the client hangs up.
fn flood(mut stream: TcpStream, declared_length: Option<u64>, flooded: &AtomicU64) {
    let length = declared_length.map_or(String::new(), |n| format!("content-length: {n}\r\n"));
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{length}connection: close\r\n\r\n{{\"choices\": \""
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = [b'a'; 64 * 1024];
    while stream.write_all(&chunk).is_ok() {
        flooded.fetch_add(chunk.len() as u64, Ordering::SeqCst);
    }
}
