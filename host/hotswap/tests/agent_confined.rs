//! A revision agent is code someone else controls: it gets no secrets from
//! our environment, and when its time is up everything it started stops.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::time::Duration;
use verifine_hotswap::agent::{Accept, AgentConfig, ask};
use verifine_hotswap::revision::{Origin, RevisionRecord};
use verifine_runtime::{PluginKind, Provenance};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("verifine-agent-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
