//! A revision agent is code someone else controls: it gets no secrets from
//! our environment, and when its time is up everything it started stops.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::time::Duration;
use verifine_hotswap::agent::{Accept, AgentConfig, ask};
use verifine_hotswap::revision::{Origin, RevisionRecord};
use verifine_runtime::{PluginKind, Provenance};

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("agent-{name}"))
}

fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("agent.sh");
    std::fs::write(&path, format!("#!/bin/sh\nset -eu\ndir=\"$1\"\n{body}\n")).unwrap();
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions).unwrap();
    path
}

fn live() -> RevisionRecord {
    RevisionRecord {
        plugin: Provenance {
            name: "answer-mentioned".into(),
            version: "0.1.0".into(),
            sha256: "0".repeat(64),
        },
        kind: PluginKind::Rubric,
        api_version: "0.1.0".into(),
        origin: Origin::Config {
            spec: "answer-mentioned".into(),
        },
        loaded_at: 0,
    }
}

fn config(agent: &Path, timeout_seconds: u64) -> AgentConfig {
    AgentConfig {
        command: vec![agent.display().to_string()],
        timeout_seconds,
        ..AgentConfig::default()
    }
}

#[test]
fn an_agent_gets_no_secrets_and_its_whole_process_group_stops_at_the_deadline() {
    let dir = scratch("deadline");
    // SAFETY: set before any thread of this test reads the environment; the
    // variable stands for a secret (an API key) the host holds.
    unsafe { std::env::set_var("VERIFINE_TEST_SECRET", "hunter2") };
    let agent = script(
        &dir,
        "env > \"$dir/env.txt\"\n(sleep 2; touch \"$dir/grandchild-alive\") &\nsleep 60",
    );
    let work = dir.join("revision");
    let started = std::time::Instant::now();
    let err = ask(&config(&agent, 1), &work, 3, &live(), &[])
        .err()
        .expect("the agent ran out of time");
    assert!(err.to_string().contains("time limit"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let env = std::fs::read_to_string(work.join("env.txt")).unwrap();
    assert!(
        !env.contains("hunter2"),
        "the secret reached the agent:\n{env}"
    );
    assert!(env.contains("PATH="), "{env}");
    // The background process it started was killed with it.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !work.join("grandchild-alive").exists(),
        "a grandchild outlived the agent"
    );

    // A well-behaved agent afterwards is heard as usual (it wrote nothing).
    let quiet = script(&dir, "echo nothing to revise");
    assert!(
        ask(&config(&quiet, 10), &dir.join("again"), 4, &live(), &[])
            .unwrap()
            .is_none()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn accept_component_refuses_a_crate_so_no_agent_code_is_built() {
    let dir = scratch("component-only");
    let agent = script(
        &dir,
        "mkdir -p \"$dir/revised/src\"\nprintf '[package]\\nname = \"x\"\\nversion = \"0.1.0\"\\n' > \"$dir/revised/Cargo.toml\"\necho 'fn main() {}' > \"$dir/revised/build.rs\"",
    );
    let config = AgentConfig {
        accept: Accept::Component,
        ..config(&agent, 10)
    };
    let err = ask(&config, &dir.join("revision"), 1, &live(), &[])
        .err()
        .expect("a crate is refused");
    assert!(err.to_string().contains("accept = \"component\""), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_revised_crate_is_built_against_the_live_crates_lock_and_may_not_add_dependencies() {
    let dir = scratch("locked");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = |agent: &Path| AgentConfig {
        source: Some(root.join("examples/loophole-rubric")),
        build_target_dir: Some(root.join("target/agent-revisions")),
        ..config(agent, 300)
    };
    // A revision that bumps its version and throws the lock away: built,
    // against the live crate's lock, which follows the new version.
    let agent = script(
        &dir,
        "cd \"$dir\"\ncp -R source revised\n\
         sed -i 's/^version = \"0.1.0\"$/version = \"0.2.0\"/' revised/Cargo.toml\n\
         rm revised/Cargo.lock",
    );
    let answer = ask(&config(&agent), &dir.join("bumped"), 1, &live(), &[])
        .unwrap()
        .expect("a revision");
    assert!(!answer.bytes.is_empty());
    let lock = std::fs::read_to_string(dir.join("bumped/revised/Cargo.lock")).unwrap();
    assert!(lock.contains("name = \"answer-mentioned\"\nversion = \"0.2.0\""));

    // The same, adding a dependency the live crate does not have: refused.
    let agent = script(
        &dir,
        "cd \"$dir\"\ncp -R source revised\n\
         sed -i 's/^version = \"0.1.0\"$/version = \"0.2.0\"/' revised/Cargo.toml\n\
         printf '\\n[dependencies.itoa]\\nversion = \"1\"\\n' >> revised/Cargo.toml\n\
         rm revised/Cargo.lock",
    );
    let err = ask(&config(&agent), &dir.join("revision"), 1, &live(), &[])
        .err()
        .expect("a new dependency is refused");
    let message = err.to_string();
    assert!(message.contains("--locked"), "{message}");
    // The live crate's lock was resolved beside its copy, without the
    // workspace's other packages.
    let lock = std::fs::read_to_string(dir.join("revision/source/Cargo.lock")).unwrap();
    assert!(lock.contains("name = \"answer-mentioned\""), "{lock}");
    assert!(!lock.contains("name = \"candle-core\""));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs an agent whose script tries `attempts`, each a shell command that
/// must fail inside the sandbox; it writes which succeeded to `escaped.txt`.
fn escapes(name: &str, attempts: &[&str]) -> Vec<String> {
    let dir = scratch(name);
    std::fs::write(dir.join("gold.jsonl"), "{\"answer\": 42}\n").unwrap();
    let mut body = String::from(": > \"$dir/escaped.txt\"\n");
    for attempt in attempts {
        body.push_str(&format!(
            "if ( {attempt} ) >/dev/null 2>&1; then echo '{}' >> \"$dir/escaped.txt\"; fi\n",
            attempt.replace('\'', "")
        ));
    }
    // What it may make in its own directory, a link among them, is cleared
    // up (links are not read back).
    body.push_str("find \"$dir\" -type l -delete\n");
    let agent = script(&dir, &body);
    let work = dir.join("revision");
    assert!(
        ask(&config(&agent, 20), &work, 1, &live(), &[])
            .unwrap()
            .is_none()
    );
    let escaped = std::fs::read_to_string(work.join("escaped.txt")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    escaped.lines().map(str::to_string).collect()
}

#[test]
fn an_agent_reads_and_writes_nothing_of_the_user_but_its_own_directory() {
    let me = std::process::id();
    let escaped = escapes(
        "files",
        &[
            // The run's records beside it, by relative and absolute path.
            "cat ../gold.jsonl",
            "cat \"$dir/../gold.jsonl\"",
            "ls ..",
            // Writing outside its directory, or planting a link out.
            "touch ../planted",
            "echo x > /tmp/verifine-agent-escape",
            "ln -s ../gold.jsonl \"$dir/link\" && cat \"$dir/link\"",
            // verifine's environment and memory, through /proc.
            &format!("cat /proc/{me}/environ"),
            "cat /proc/$PPID/environ",
            &format!("head -c1 /proc/{me}/mem"),
            // Signalling verifine.
            &format!("kill -0 {me}"),
            // System files off the allow-list (also as root): password
            // hashes, the raw disks, the list of /etc and /dev.
            "cat /etc/shadow",
            "cat /etc/gshadow",
            "cat /etc/hostname",
            "ls /etc",
            "ls /dev",
            "head -c1 /dev/sda",
            "head -c1 /dev/vda",
            "head -c1 /dev/nvme0n1",
            // A device node of its own (as root, a window on the disk).
            "mknod \"$dir/disk\" b 8 0",
        ],
    );
    assert!(escaped.is_empty(), "the agent got out: {escaped:?}");
    assert!(!Path::new("/tmp/verifine-agent-escape").exists());
}

#[test]
fn an_agent_still_runs_system_programs_and_uses_its_own_directory() {
    let dir = scratch("works");
    let agent = script(
        &dir,
        "cd \"$dir\"\nmkdir -p scratch\necho hello > scratch/note\n\
         tmp=$(mktemp)\necho ok > \"$tmp\"\ncat \"$tmp\" scratch/note > result.txt\n\
         test \"$HOME\" = \"$dir\"\n\
         echo discarded > /dev/null\nhead -c4 /dev/urandom > /dev/null\n\
         python3 -c 'import ssl, json, asyncio; asyncio.run(asyncio.sleep(0))'",
    );
    let work = dir.join("revision");
    assert!(
        ask(&config(&agent, 20), &work, 1, &live(), &[])
            .unwrap()
            .is_none()
    );
    assert_eq!(
        std::fs::read_to_string(work.join("result.txt")).unwrap(),
        "ok\nhello\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn descendants_in_new_sessions_are_killed_and_cannot_hold_verifine() {
    let dir = scratch("setsid");
    // A detached grandchild in a session of its own that keeps the output
    // pipe open and would write later; the agent itself exits at once.
    let agent = script(
        &dir,
        "setsid sh -c 'sleep 3; touch \"$1/late\"' sh \"$dir\" &\n\
         setsid sh -c 'sleep 3; touch \"$1/late2\"' sh \"$dir\" </dev/null >/dev/null 2>&1 &\n\
         exit 0",
    );
    let work = dir.join("revision");
    let started = std::time::Instant::now();
    assert!(
        ask(&config(&agent, 20), &work, 1, &live(), &[])
            .unwrap()
            .is_none()
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "verifine waited {:?} for a detached grandchild",
        started.elapsed()
    );
    // The same past the deadline: the error is true, every process stopped.
    let stuck = script(&dir, "setsid sleep 100 &\nsleep 100");
    let started = std::time::Instant::now();
    let err = ask(&config(&stuck, 1), &dir.join("stuck"), 2, &live(), &[])
        .err()
        .expect("the agent ran out of time");
    assert!(err.to_string().contains("time limit"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(!work.join("late").exists() && !work.join("late2").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fifos_and_links_among_the_outputs_are_refused_without_blocking() {
    let dir = scratch("fifo");
    for (name, body) in [
        ("fifo", "mkfifo \"$dir/revised.wasm\""),
        ("link", "ln -s /etc/passwd \"$dir/revised.wasm\""),
        (
            "crate-fifo",
            "mkdir -p \"$dir/revised\"\nmkfifo \"$dir/revised/Cargo.toml\"",
        ),
    ] {
        let agent = script(&dir, body);
        let started = std::time::Instant::now();
        let err = ask(&config(&agent, 20), &dir.join(name), 1, &live(), &[])
            .err()
            .unwrap_or_else(|| panic!("{name}: its output was taken"));
        assert!(
            err.to_string().contains("not a regular file"),
            "{name}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_workspace_member_copied_out_inherits_nothing_and_resolves_on_its_own() {
    use verifine_confined::plugin_crate::{copy_standalone, resolve_lock};
    let dir = scratch("standalone");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let copy = dir.join("worked-steps");
    copy_standalone(&root.join("plugins/worked-steps"), &copy).unwrap();

    let text = std::fs::read_to_string(copy.join("Cargo.toml")).unwrap();
    let manifest: toml::Table = text.parse().unwrap();
    let workspace: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let package = &manifest["package"];
    for key in ["edition", "version", "license", "rust-version"] {
        assert_eq!(
            package[key], workspace["workspace"]["package"][key],
            "package.{key} is written out"
        );
    }
    let api = &manifest["dependencies"]["verifine-plugin-api"];
    let path = Path::new(api["path"].as_str().unwrap());
    assert!(
        path.is_absolute() && path.join("Cargo.toml").exists(),
        "{api}"
    );
    assert!(
        manifest["dependencies"]["serde"].get("version").is_some(),
        "{text}"
    );
    assert_eq!(
        manifest["workspace"],
        toml::Value::Table(Default::default())
    );

    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let lock = resolve_lock(&copy, deadline).unwrap();
    assert!(lock.contains("name = \"worked-steps\""), "{lock}");
    std::fs::remove_dir_all(&dir).unwrap();
}

mod confined_builds;

#[test]
fn an_agent_reaches_no_unix_socket_outside_but_keeps_ip() {
    use std::os::unix::net::{UnixDatagram, UnixListener};
    let dir = scratch("sockets");
    // Sockets outside its directory, as Docker's, D-Bus's or journald's
    // would be.
    let outside = UnixListener::bind(dir.join("outside.sock")).unwrap();
    outside.set_nonblocking(true).unwrap();
    let outside_datagrams = UnixDatagram::bind(dir.join("outside.dgram")).unwrap();
    outside_datagrams.set_nonblocking(true).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let unix = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?})",
        dir.join("outside.sock").display().to_string()
    );
    let datagram = format!(
        "import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); \
         a.sendto(b'x', {:?})",
        dir.join("outside.dgram").display().to_string()
    );
    let agent = script(
        &dir,
        &format!(
            "if python3 -c \"{unix}\"; then echo unix > \"$dir/escaped.txt\"; fi\n\
             if python3 -c \"{datagram}\"; then echo datagram >> \"$dir/escaped.txt\"; fi\n\
             python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port})).close()\"\n\
             python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); assert b.recv(1)'"
        ),
    );
    let work = dir.join("revision");
    assert!(
        ask(&config(&agent, 20), &work, 1, &live(), &[])
            .unwrap()
            .is_none()
    );
    assert!(
        !work.join("escaped.txt").exists(),
        "the agent connected to a UNIX socket outside: {:?}",
        std::fs::read_to_string(work.join("escaped.txt"))
    );
    assert!(outside.accept().is_err(), "the outside socket was reached");
    assert!(
        outside_datagrams.recv(&mut [0u8; 8]).is_err(),
        "a datagram reached the outside socket"
    );
    // It kept the network an LLM agent needs.
    tcp.set_nonblocking(true).unwrap();
    assert!(
        tcp.accept().is_ok(),
        "the agent's TCP connection never came"
    );
}

#[test]
fn a_relative_revision_directory_still_builds_the_agents_crate() {
    let dir = scratch("relative");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let agent = script(
        &dir,
        "cd \"$dir\"\ncp -R source revised\n\
         sed -i 's/^version = \"0.1.0\"$/version = \"0.1.1\"/' revised/Cargo.toml",
    );
    let config = AgentConfig {
        source: Some(root.join("examples/loophole-rubric")),
        build_target_dir: Some(root.join("target/agent-revisions")),
        ..config(&agent, 300)
    };
    // The same directory, named relative to where the tests run.
    let absolute = dir.join("revision");
    let cwd = std::env::current_dir().unwrap();
    let up: PathBuf = cwd.components().skip(1).map(|_| "..").collect();
    let relative = up.join(absolute.strip_prefix("/").unwrap());
    assert!(relative.is_relative());
    let answer = ask(&config, &relative, 1, &live(), &[])
        .unwrap()
        .expect("a revision");
    assert!(!answer.bytes.is_empty());
    assert!(absolute.join("revised/Cargo.lock").is_file());
}
