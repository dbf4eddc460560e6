//! The build of an agent's crate runs the agent's code too (`build.rs`,
//! proc-macros): it writes only a fresh directory of its own, which is gone
//! afterwards, reads no more of the toolchain than an offline build needs,
//! and makes no socket.

use super::{config, live, scratch, script};
use std::path::Path;
use verifine_hotswap::agent::{AgentConfig, ask};

/// A `build.rs` that tries each way out and fails the build, naming them,
/// if any worked; it also sets the variable the library below needs, so a
/// build that skipped it fails too.
fn hostile_build_script(shared: &Path, parent: &Path, unix: &Path, port: u16) -> String {
    format!(
        r#"use std::io::Write;
fn main() {{
    let mut escaped: Vec<&str> = Vec::new();
    let cargo_home = std::env::var("CARGO_HOME").unwrap_or_default();
    if std::fs::write({shared:?}, "planted").is_ok() {{ escaped.push("wrote the shared target"); }}
    if std::fs::write({parent:?}, "planted").is_ok() {{ escaped.push("wrote beside its build"); }}
    if std::fs::read_dir(&cargo_home).is_ok() {{ escaped.push("listed CARGO_HOME"); }}
    if std::fs::read(format!("{{cargo_home}}/env")).is_ok() {{ escaped.push("read CARGO_HOME/env"); }}
    if std::fs::read(format!("{{cargo_home}}/credentials.toml")).is_ok() {{ escaped.push("read credentials"); }}
    if std::fs::read("/etc/shadow").is_ok() {{ escaped.push("read /etc/shadow"); }}
    if std::net::TcpStream::connect(("127.0.0.1", {port})).is_ok() {{ escaped.push("connected over TCP"); }}
    if std::os::unix::net::UnixStream::connect({unix:?}).is_ok() {{ escaped.push("connected to a UNIX socket"); }}
    if !escaped.is_empty() {{
        let _ = writeln!(std::io::stderr(), "escaped: {{escaped:?}}");
        std::process::exit(1);
    }}
    println!("cargo:rustc-env=VERIFINE_BUILD_SCRIPT_RAN=1");
}}
"#,
        shared = shared.join("planted").display().to_string(),
        parent = parent.join("planted").display().to_string(),
        unix = unix.display().to_string(),
    )
}

#[test]
fn a_confined_build_writes_only_a_fresh_directory_and_reaches_nothing() {
    use std::os::unix::net::UnixListener;
    let dir = scratch("confined-build");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Stands for the target directory `verifine plugin build` shares.
    let shared = dir.join("plugin-target");
    std::fs::create_dir_all(&shared).unwrap();
    let parent = dir.join("builds");
    let unix = UnixListener::bind(dir.join("outside.sock")).unwrap();
    unix.set_nonblocking(true).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let build_script = hostile_build_script(
        &shared,
        &parent,
        &dir.join("outside.sock"),
        tcp.local_addr().unwrap().port(),
    );
    let agent = script(
        &dir,
        &format!(
            "cd \"$dir\"\ncp -R source revised\n\
             sed -i 's/^version = \"0.1.0\"$/version = \"0.3.0\"/' revised/Cargo.toml\n\
             cat > revised/build.rs <<'VERIFINE_END'\n{build_script}VERIFINE_END\n\
             echo 'const _: &str = env!(\"VERIFINE_BUILD_SCRIPT_RAN\");' >> revised/src/lib.rs"
        ),
    );
    let config = AgentConfig {
        source: Some(root.join("examples/loophole-rubric")),
        build_target_dir: Some(parent.clone()),
        ..config(&agent, 600)
    };
    let answer = ask(&config, &dir.join("revision"), 1, &live(), &[])
        .unwrap()
        .expect("the revision is built");
    assert!(!answer.bytes.is_empty());
    assert!(!shared.join("planted").exists());
    assert!(!parent.join("planted").exists());
    assert!(unix.accept().is_err(), "the UNIX socket was reached");
    assert!(tcp.accept().is_err(), "the TCP listener was reached");
    // The directory the build wrote is gone: nothing can load from it.
    assert_eq!(build_dirs_left(&parent), Vec::<String>::new());
    // What it started from (the live crate's dependencies, compiled from
    // the user's own crate) is kept for the next revision, untouched.
    let seeds: Vec<String> = names_in(&parent)
        .into_iter()
        .filter(|n| n.starts_with("seed-"))
        .collect();
    assert_eq!(seeds.len(), 1, "{seeds:?}");
    assert!(!parent.join(&seeds[0]).join("target/planted").exists());
    // A well-behaved revision afterwards builds as usual, from the same seed.
    let agent = script(
        &dir,
        "cd \"$dir\"\ncp -R source revised\n\
         sed -i 's/^version = \"0.1.0\"$/version = \"0.3.1\"/' revised/Cargo.toml",
    );
    let good = AgentConfig {
        command: vec![agent.display().to_string()],
        ..config.clone()
    };
    let answer = ask(&good, &dir.join("good"), 2, &live(), &[])
        .unwrap()
        .expect("the good revision is built");
    assert!(!answer.bytes.is_empty());
    assert_eq!(build_dirs_left(&parent), Vec::<String>::new());
}

#[test]
fn a_build_script_that_fails_leaves_no_directory_behind() {
    let dir = scratch("confined-build-fails");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let parent = dir.join("builds");
    let agent = script(
        &dir,
        "cd \"$dir\"\ncp -R source revised\n\
         printf 'fn main() { std::process::exit(3) }\\n' > revised/build.rs",
    );
    let config = AgentConfig {
        source: Some(root.join("examples/loophole-rubric")),
        build_target_dir: Some(parent.clone()),
        ..config(&agent, 600)
    };
    let err = ask(&config, &dir.join("revision"), 1, &live(), &[])
        .err()
        .expect("the build fails");
    assert!(err.to_string().contains("cargo build failed"), "{err}");
    assert_eq!(build_dirs_left(&parent), Vec::<String>::new());
}

fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Build directories (not seeds) left under `parent`.
fn build_dirs_left(parent: &Path) -> Vec<String> {
    names_in(parent)
        .into_iter()
        .filter(|n| !n.starts_with("seed-"))
        .collect()
}
