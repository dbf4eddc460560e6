//! Checkpoints: weights, optimizer state and run state in one directory,
//! written under a temporary name and renamed, so a kill at any moment leaves
//! either the previous checkpoint or the new one, never half of one.

use crate::error::{Result, TrainError, ensure};
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const WEIGHTS: &str = "model.safetensors";
const OPTIMIZER: &str = "optimizer.safetensors";
const STATE: &str = "state.json";

/// Writes `checkpoints/<name>/` atomically and returns its path.
pub fn save(
    checkpoints: &Path,
    name: &str,
    varmap: &VarMap,
    optimizer: &HashMap<String, Tensor>,
    state: &impl Serialize,
) -> Result<PathBuf> {
    std::fs::create_dir_all(checkpoints).map_err(|e| TrainError::io("creating", checkpoints, e))?;
    let target = checkpoints.join(name);
    let tmp = verifine_base::temporary_sibling(&checkpoints.join(name));
    std::fs::create_dir(&tmp).map_err(|e| TrainError::io("creating", &tmp, e))?;
    varmap.save(tmp.join(WEIGHTS))?;
    candle_core::safetensors::save(optimizer, tmp.join(OPTIMIZER))?;
    let state_path = tmp.join(STATE);
    let state = serde_json::to_vec_pretty(state).expect("run state serializes");
    std::fs::write(&state_path, state).map_err(|e| TrainError::io("writing", &state_path, e))?;
    let rename = |from: &Path, to: &Path| {
        std::fs::rename(from, to).map_err(|e| TrainError::io("renaming into", to, e))
    };
    if target.exists() {
        // Replacing a checkpoint of the same name: move the old one aside
        // first so there is never a moment without a complete one.
        let old = checkpoints.join(format!(".{name}.old-{}", std::process::id()));
        rename(&target, &old)?;
        rename(&tmp, &target)?;
        std::fs::remove_dir_all(&old).map_err(|e| TrainError::io("removing", &old, e))?;
    } else {
        rename(&tmp, &target)?;
    }
    Ok(target)
}

/// Loads a checkpoint into `varmap` (whose variables must already exist) and
/// returns the optimizer state and the run state.
pub fn load<S: DeserializeOwned>(
    dir: &Path,
    varmap: &mut VarMap,
    device: &Device,
) -> Result<(HashMap<String, Tensor>, S)> {
    for file in [WEIGHTS, OPTIMIZER, STATE] {
        ensure!(
            dir.join(file).exists(),
            "{} is not a complete checkpoint (no {file})",
            dir.display()
        );
    }
    varmap
        .load(dir.join(WEIGHTS))
        .map_err(|e| TrainError::unreadable(&dir.join(WEIGHTS), e))?;
    let optimizer = candle_core::safetensors::load(dir.join(OPTIMIZER), device)
        .map_err(|e| TrainError::unreadable(&dir.join(OPTIMIZER), e))?;
    Ok((optimizer, read_state(dir)?))
}

/// Reads only the run state of a checkpoint (to learn its config before any
/// model exists).
pub fn read_state<S: DeserializeOwned>(dir: &Path) -> Result<S> {
    let path = dir.join(STATE);
    let bytes = std::fs::read(&path).map_err(|e| TrainError::io("reading", &path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| TrainError::unreadable(&path, e))
}

/// Deletes all but the newest `keep` complete checkpoints, and temporary
/// directories that a killed writer left behind.
pub fn prune(checkpoints: &Path, keep: usize) -> Result<()> {
    let mut complete = Vec::new();
    let reading = |e| TrainError::io("reading", checkpoints, e);
    for entry in std::fs::read_dir(checkpoints).map_err(reading)? {
        let path = entry.map_err(reading)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        match name {
            Some(n) if n.starts_with('.') => {
                std::fs::remove_dir_all(&path).map_err(|e| TrainError::io("removing", &path, e))?
            }
            Some(_) if path.join(STATE).exists() => complete.push(path),
            _ => {}
        }
    }
    complete.sort();
    let excess = complete.len().saturating_sub(keep);
    for old in &complete[..excess] {
        std::fs::remove_dir_all(old).map_err(|e| TrainError::io("removing", old, e))?;
    }
    Ok(())
}

/// The newest complete checkpoint under `checkpoints/` (names sort by step).
pub fn latest(checkpoints: &Path) -> Option<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(checkpoints)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
                && p.join(STATE).exists()
        })
        .collect();
    names.sort();
    names.pop()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Decoder, ModelConfig};
    use crate::optim::{AdamW, OptimConfig};

    #[test]
    fn round_trip_and_replacement_leave_one_complete_checkpoint() {
        let dir = verifine_test_support::scratch_path("ckpt");
        let varmap = VarMap::new();
        let _model = Decoder::new(ModelConfig::tiny(7), &varmap, &Device::Cpu).unwrap();
        let opt = AdamW::new(crate::model::sorted_vars(&varmap), OptimConfig::default()).unwrap();
        let path = save(
            &dir,
            "step-000010",
            &varmap,
            &opt.state(),
            &serde_json::json!({"step": 10}),
        )
        .unwrap();
        save(
            &dir,
            "step-000010",
            &varmap,
            &opt.state(),
            &serde_json::json!({"step": 10}),
        )
        .unwrap();
        save(
            &dir,
            "step-000020",
            &varmap,
            &opt.state(),
            &serde_json::json!({"step": 20}),
        )
        .unwrap();
        assert_eq!(latest(&dir).unwrap(), dir.join("step-000020"));
        let hidden: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "temporary directories left behind");

        let mut other = VarMap::new();
        let _other_model = Decoder::new(ModelConfig::tiny(7), &other, &Device::Cpu).unwrap();
        let (state, meta): (_, serde_json::Value) = load(&path, &mut other, &Device::Cpu).unwrap();
        assert_eq!(meta["step"], 10);
        assert_eq!(state.len(), opt.state().len());
        let a = varmap.data().lock().unwrap()["embed"]
            .as_tensor()
            .to_vec2::<f32>()
            .unwrap();
        let b = other.data().lock().unwrap()["embed"]
            .as_tensor()
            .to_vec2::<f32>()
            .unwrap();
        assert_eq!(a, b);

        std::fs::remove_file(dir.join("step-000020").join(STATE)).unwrap();
        assert!(
            load::<serde_json::Value>(&dir.join("step-000020"), &mut other, &Device::Cpu).is_err()
        );
        assert_eq!(latest(&dir).unwrap(), dir.join("step-000010"));

        std::fs::create_dir_all(dir.join(".step-000030.tmp-1")).unwrap();
        save(
            &dir,
            "step-000040",
            &varmap,
            &opt.state(),
            &serde_json::json!({"step": 40}),
        )
        .unwrap();
        prune(&dir, 1).unwrap();
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        // step-000020 is incomplete (no state), so it is not counted, and kept.
        assert!(left.contains(&"step-000040".to_string()), "{left:?}");
        assert!(!left.contains(&"step-000010".to_string()), "{left:?}");
        assert!(!left.iter().any(|n| n.starts_with('.')), "{left:?}");
        let state: serde_json::Value = read_state(&dir.join("step-000040")).unwrap();
        assert_eq!(state["step"], 40);
    }
}
