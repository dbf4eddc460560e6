//! What an agent's revision costs to build, before and after confined
//! builds got a fresh target directory each (issue 38).
//!
//! - anchor: the old path, an unconfined rebuild in a warm shared target
//!   directory (what an agent's build reused before);
//! - seeded: the new path, confined, in a fresh directory that starts as a
//!   copy of the seed (the live crate's dependencies);
//! - cold: the new path without a seed, once (a fresh directory from
//!   nothing).
//!
//! `cargo bench -p verifine-confined --bench agent_build [-- ROUNDS]`
//! (default 3 rounds, alternating anchor and seeded).

use std::path::Path;
use std::time::{Duration, Instant};
use verifine_confined::plugin_crate::{
    build, build_confined, copy_standalone, local_source_trees, pin_lock, resolve_lock, seed,
};

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = root.join("target/bench-agent-build");
    let _ = std::fs::remove_dir_all(&work);
    let deadline = || Instant::now() + Duration::from_secs(1800);
    let source = work.join("source");
    copy_standalone(&root.join("examples/loophole-rubric"), &source).unwrap();
    let lock = resolve_lock(&source, deadline()).unwrap();
    let sources = local_source_trees(&source).unwrap();
    let builds = work.join("builds");
    let started = Instant::now();
    let seed = seed::ensure(&source, &lock, &builds, deadline())
        .unwrap()
        .expect("the seed builds");
    println!(
        "seed (once per run and lock): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let shared = work.join("shared-target");
    let mut anchor = Vec::new();
    let mut seeded = Vec::new();
    for round in 0..=rounds {
        let revised = work.join(format!("revised-{round}"));
        copy_standalone(&source, &revised).unwrap();
        let manifest = revised.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(
            &manifest,
            text.replace(
                "version = \"0.1.0\"",
                &format!("version = \"0.1.{}\"", round + 1),
            ),
        )
        .unwrap();
        pin_lock(&revised, &source, &lock).unwrap();
        let started = Instant::now();
        build(&revised, &shared).unwrap();
        let unconfined = started.elapsed();
        let started = Instant::now();
        build_confined(&revised, &builds, &sources, Some(&seed), deadline()).unwrap();
        let confined = started.elapsed();
        // Round 0 warms the shared directory (and the page cache).
        if round > 0 {
            anchor.push(unconfined.as_secs_f64());
            seeded.push(confined.as_secs_f64());
        }
    }
    let revised = work.join("revised-cold");
    copy_standalone(&work.join("revised-1"), &revised).unwrap();
    let started = Instant::now();
    build_confined(&revised, &builds, &sources, None, deadline()).unwrap();
    let cold = started.elapsed().as_secs_f64();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (a, s) = (median(&mut anchor), median(&mut seeded));
    println!("anchor, unconfined warm shared target, median of {rounds}: {a:.2} s");
    println!(
        "seeded confined build, fresh directory, median of {rounds}: {s:.2} s ({:.2}x the anchor)",
        s / a
    );
    println!(
        "cold confined build, no seed: {cold:.1} s ({:.1}x the anchor)",
        cold / a
    );
    let _ = std::fs::remove_dir_all(&work);
}
