//! Good clients' latency with and without hostile ones, and the server's
//! peak memory (`bench/serve/hostile.sh` runs it; BENCHMARKS.md has the
//! figures). The server runs in a child process of this binary (`serve`
//! mode) with the default limits, so its VmHWM is its own. Phase one: good
//! clients alone (the anchor). Phase two: the same good clients while
//! hostile ones send oversized batches, drip request heads, abandon
//! full-size batches and flood connections.
//!
//! `hostile_load [SECONDS] [GOOD_CLIENTS]` (defaults 10 and 4).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use verifine_runtime::{Limits, PluginSetting, Runtime};
use verifine_serve::{FailurePolicy, RequestLimits, ServeOptions, Server, SwapOptions};

/// The server's peak resident memory may not pass this (512 MiB): the
/// default budgets (256 MiB of bodies, 65 536 samples) and 1 024
/// connections with room to spare.
const MEMORY_BOUND_KB: u64 = 512 * 1024;
/// Connections the flood holds open (the server's default cap is 1024).
const FLOOD_CONNECTIONS: usize = 1500;
/// Connections dripping a request head one byte at a time.
const SLOW_HEADS: usize = 200;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        return serve();
    }
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let good: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);
    let (mut child, address) = start_server();
    let phase = Duration::from_secs(seconds);
    let alone = good_clients(address, good, phase);
    let hwm_alone = peak_memory(child.id());
    let stop = Arc::new(AtomicBool::new(false));
    let hostile = start_hostile(address, stop.clone());
    std::thread::sleep(Duration::from_secs(1));
    let attacked = good_clients(address, good, phase);
    stop.store(true, Ordering::Relaxed);
    let sent: Vec<(String, u64)> = hostile.into_iter().map(|h| h.join().unwrap()).collect();
    let hwm = peak_memory(child.id());
    drop(child.stdin.take());
    let _ = child.wait();
    println!("good clients: {good}, {seconds} s per phase, OpenRLHF bodies of 8 queries");
    println!("alone (anchor): {}", alone.summary());
    println!("under attack:   {}", attacked.summary());
    println!(
        "p99 ratio (under attack / alone): {:.2}",
        attacked.p99() / alone.p99()
    );
    for (what, n) in sent {
        println!("hostile {what}: {n}");
    }
    println!("server VmHWM: {hwm_alone} kB after the anchor, {hwm} kB at the end");
    if hwm > MEMORY_BOUND_KB {
        println!("FAILED: the server's peak passed the bound of {MEMORY_BOUND_KB} kB");
        std::process::exit(1);
    }
    println!("within the bound of {MEMORY_BOUND_KB} kB");
}

/// `serve` mode: the default limits, math-answer, until stdin closes.
fn serve() {
    let scratch = verifine_test_support::scratch_path("hostile-load");
    let options = ServeOptions {
        rubric: PluginSetting::new("math-answer"),
        aggregator: None,
        dir: scratch.to_path_buf(),
        address: "127.0.0.1:0".parse().unwrap(),
        token: None,
        limits: RequestLimits::default(),
        workers: 2,
        io_threads: 2,
        batch_size: 64,
        on_failure: FailurePolicy::Zero,
        swap: SwapOptions {
            keep_revisions: 1,
            gate: Default::default(),
            canary: Vec::new(),
            watch_dir: None,
            interval: Duration::from_millis(500),
        },
    };
    let server = Server::bind(options, Runtime::new(Limits::default()).unwrap()).unwrap();
    println!("{}", server.local_addr());
    let running = server.spawn();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    running.stop().unwrap();
}

fn start_server() -> (Child, SocketAddr) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().parse().unwrap())
}

/// The process's peak resident set (VmHWM), in kB.
fn peak_memory(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn request(address: SocketAddr, path: &str, body: &[u8]) -> Vec<u8> {
    let mut text = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    text.extend_from_slice(body);
    text
}

/// Reads one response; its status.
fn read_response(reader: &mut BufReader<TcpStream>) -> std::io::Result<u16> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    reader.read_exact(&mut vec![0; length])?;
    Ok(status)
}

struct Latencies {
    micros: Vec<u64>,
    /// Tries that did not get a 200, by status (0: a connection error).
    refused: std::collections::BTreeMap<u16, u64>,
    seconds: f64,
}

impl Latencies {
    fn quantile(&self, q: f64) -> f64 {
        let mut sorted = self.micros.clone();
        sorted.sort_unstable();
        let i = ((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1));
        sorted.get(i).copied().unwrap_or(0) as f64 / 1000.0
    }

    fn p99(&self) -> f64 {
        self.quantile(0.99)
    }

    fn summary(&self) -> String {
        format!(
            "{} answered ({:.0} req/s), p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, tries refused {:?}",
            self.micros.len(),
            self.micros.len() as f64 / self.seconds,
            self.quantile(0.5),
            self.p99(),
            self.quantile(1.0),
            self.refused
        )
    }
}

/// `clients` keep-alive connections posting 8-query batches for `phase`.
fn good_clients(address: SocketAddr, clients: usize, phase: Duration) -> Latencies {
    let body = serde_json::json!({
        "query": vec!["6*7 = 42\n#### 42"; 8],
        "labels": vec!["42"; 8],
    })
    .to_string();
    let message = request(address, "/get_reward", body.as_bytes());
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let message = message.clone();
            std::thread::spawn(move || {
                let mut micros = Vec::new();
                let mut refused = Vec::new();
                let end = Instant::now() + phase;
                let mut connection: Option<BufReader<TcpStream>> = None;
                while Instant::now() < end {
                    // One request, counted from its first try to its 200:
                    // refusals and reconnects are part of its latency.
                    let started = Instant::now();
                    while Instant::now() < end + phase {
                        let reader = match connection.as_mut() {
                            Some(reader) => reader,
                            None => match TcpStream::connect(address) {
                                Ok(stream) => connection.insert(BufReader::new(stream)),
                                Err(_) => {
                                    refused.push(0);
                                    continue;
                                }
                            },
                        };
                        let sent = reader.get_mut().write_all(&message);
                        match sent.and_then(|()| read_response(reader)) {
                            Ok(200) => {
                                micros.push(started.elapsed().as_micros() as u64);
                                break;
                            }
                            Ok(status) => refused.push(status),
                            Err(_) => {
                                refused.push(0);
                                connection = None;
                            }
                        }
                    }
                }
                (micros, refused)
            })
        })
        .collect();
    let mut all = Latencies {
        micros: Vec::new(),
        refused: std::collections::BTreeMap::new(),
        seconds: phase.as_secs_f64(),
    };
    for thread in threads {
        let (micros, refused) = thread.join().unwrap();
        all.micros.extend(micros);
        for status in refused {
            *all.refused.entry(status).or_insert(0) += 1;
        }
    }
    all
}

/// Runs `attack` in a loop on its own thread until `stop`; the thread
/// returns what it is and how many times it attacked.
fn hostile_loop(
    what: &'static str,
    stop: Arc<AtomicBool>,
    mut attack: impl FnMut() -> u64 + Send + 'static,
) -> std::thread::JoinHandle<(String, u64)> {
    std::thread::spawn(move || {
        let mut count = 0;
        while !stop.load(Ordering::Relaxed) {
            count += attack();
        }
        (what.to_string(), count)
    })
}

fn start_hostile(
    address: SocketAddr,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<(String, u64)>> {
    // 16 MiB of empty queries: 5.6 M samples if the server built them.
    let mut huge = b"{\"query\": [\"\"".to_vec();
    while huge.len() < (16 << 20) - 16 {
        huge.extend_from_slice(b",\"\"");
    }
    huge.extend_from_slice(b"]}");
    let oversized = Arc::new(request(address, "/get_reward", &huge));
    // A batch at the sample cap, sent and abandoned at once.
    let full = serde_json::json!({ "query": vec!["#### 1"; 16_384], "labels": vec!["1"; 16_384] });
    let abandoned = Arc::new(request(address, "/get_reward", full.to_string().as_bytes()));
    let mut threads = Vec::new();
    for _ in 0..2 {
        let oversized = oversized.clone();
        threads.push(hostile_loop(
            "oversized batches sent",
            stop.clone(),
            move || {
                let Ok(stream) = TcpStream::connect(address) else {
                    return 0;
                };
                let mut reader = BufReader::new(stream);
                let _ = reader.get_mut().write_all(&oversized);
                let _ = read_response(&mut reader);
                1
            },
        ));
    }
    threads.push(hostile_loop("batches abandoned", stop.clone(), move || {
        let Ok(mut stream) = TcpStream::connect(address) else {
            return 0;
        };
        u64::from(stream.write_all(&abandoned).is_ok())
    }));
    let mut slow: Vec<TcpStream> = Vec::new();
    threads.push(hostile_loop(
        "slow-head bytes dripped",
        stop.clone(),
        move || {
            slow.retain_mut(|s| s.write_all(b"X").is_ok());
            let dripped = slow.len() as u64;
            while slow.len() < SLOW_HEADS {
                match TcpStream::connect(address) {
                    Ok(mut s) => {
                        let _ = s.write_all(b"POST /get_reward HTTP/1.1\r\nX-Slow: ");
                        slow.push(s);
                    }
                    Err(_) => break,
                }
            }
            std::thread::sleep(Duration::from_millis(200));
            dripped
        },
    ));
    let mut idle: Vec<TcpStream> = Vec::new();
    threads.push(hostile_loop("flood connections opened", stop, move || {
        // Closed ones (the header timeout) are replaced.
        idle.retain(|s| {
            let mut byte = [0u8; 1];
            s.set_nonblocking(true).is_ok()
                && matches!((&*s).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        let mut opened = 0;
        while idle.len() < FLOOD_CONNECTIONS {
            let Ok(s) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) else {
                break;
            };
            idle.push(s);
            opened += 1;
        }
        std::thread::sleep(Duration::from_millis(250));
        opened
    }));
    threads
}
