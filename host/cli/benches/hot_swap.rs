//! From a candidate landing in a run's inbox to it being live: submit the
//! request, run the swap point (load with cached compiled code, kind and API
//! check, canary agreement against the live revision, promotion, event,
//! new scorer), measured over distinct revisions so no canary result is
//! reused. The anchor, measured in the same run, is loading the same
//! component from the code cache alone.
//!
//! `cargo bench -p verifine --bench hot_swap`

use std::time::Instant;
use verifine::run::generated_canary;
use verifine_hotswap::Slot;
use verifine_hotswap::gate::GateConfig;
use verifine_hotswap::inbox::{self, Action};
use verifine_hotswap::live::LiveReward;
use verifine_hotswap::revision::Origin;
use verifine_runtime::{Limits, PluginSetting, Runtime, spec_bytes};
use verifine_train::task::TaskConfig;

const VARIANTS: usize = 30;

/// The same component with a custom section appended: same logic, a new
/// sha256, so every promotion is a revision the gate has not seen.
fn variant(bytes: &[u8], i: usize) -> Vec<u8> {
    let name = b"bench-variant";
    let payload = format!("{i}");
    let mut content = vec![name.len() as u8];
    content.extend_from_slice(name);
    content.extend_from_slice(payload.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0); // custom section id
    out.push(content.len() as u8); // LEB128, < 128
    out.extend(content);
    out
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let run = verifine_test_support::scratch_dir("swap-bench");
    std::fs::write(run.join("config.toml"), "")?;
    let cases = generated_canary(0, 90, &TaskConfig::default());
    let slot = PluginSetting::new("math-answer");
    let runtime = Runtime::new(Limits::default())?;
    let mut live = LiveReward::new(
        Runtime::new(Limits::default())?,
        &slot,
        None,
        &run,
        5,
        GateConfig::default(),
        cases,
    )?;
    let base = spec_bytes("math-answer")?.0;
    let variants: Vec<Vec<u8>> = (0..VARIANTS).map(|i| variant(&base, i)).collect();
    // Warm the code cache: "a small plugin whose compiled code is cached".
    for v in &variants {
        runtime.load_bytes(v, "warm-up")?;
    }

    let (mut swaps, mut loads) = (Vec::new(), Vec::new());
    for (i, v) in variants.iter().enumerate() {
        let started = Instant::now();
        runtime.load_bytes(v, "anchor")?;
        loads.push(started.elapsed().as_secs_f64() * 1e3);

        let started = Instant::now();
        let origin = Origin::Watched {
            path: format!("variant-{i}.wasm"),
        };
        inbox::submit(
            &run,
            Slot::Rubric,
            &Action::Promote { origin },
            Some(v),
            None,
        )?;
        let outcome = live.swap_point(i + 1)?;
        swaps.push(started.elapsed().as_secs_f64() * 1e3);
        assert!(outcome.changed, "variant {i} was not promoted");
        outcome.finish()?;
    }
    swaps.sort_by(f64::total_cmp);
    loads.sort_by(f64::total_cmp);
    let (swap, load) = (percentile(&swaps, 0.5), percentile(&loads, 0.5));
    println!(
        "{}",
        serde_json::json!({
            "bench": "hot_swap",
            "promotions": VARIANTS,
            "canary_cases": 90,
            "landing_to_live_ms_median": swap,
            "landing_to_live_ms_p90": percentile(&swaps, 0.9),
            "landing_to_live_ms_max": swaps[swaps.len() - 1],
            "anchor_cached_load_ms_median": load,
            "ratio_to_anchor": swap / load,
            "target_ms": 50.0,
        })
    );
    std::fs::remove_dir_all(&run)?;
    Ok(())
}
