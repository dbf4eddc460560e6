//! Weights on disk (safetensors, written atomically) and the stable order of
//! trainable variables.

use crate::error::{Result, TrainError};
use candle_core::{Device, Var};
use candle_nn::VarMap;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Writes the weights as safetensors through a temporary file and a rename,
/// so a crash never leaves a half-written file.
pub fn save_weights(varmap: &VarMap, path: &Path) -> Result<()> {
    let tmp = verifine_base::temporary_sibling(path);
    varmap
        .save(&tmp)
        .map_err(|e| TrainError::unreadable(&tmp, format!("writing: {e}")))?;
    std::fs::rename(&tmp, path).map_err(|e| TrainError::io("renaming into", path, e))?;
    Ok(())
}

/// Loads weights saved by [`save_weights`] into an existing model's varmap.
pub fn load_weights(varmap: &mut VarMap, path: &Path) -> Result<()> {
    varmap
        .load(path)
        .map_err(|e| TrainError::unreadable(path, e))
}

/// Loads weights saved by [`save_weights`] (a finished run's
/// `model.safetensors`) into a model built from a configured size, after
/// checking that every tensor is there with the configured shape: a size
/// that does not match is refused naming the file, both model shapes and
/// the first tensor that differs.
pub fn load_matching_weights(varmap: &VarMap, path: &Path, device: &Device) -> Result<()> {
    let saved = candle_core::safetensors::load(path, device)
        .map_err(|e| TrainError::unreadable(path, e))?;
    let vars = sorted_vars(varmap);
    let configured: BTreeMap<&str, Vec<usize>> = vars
        .iter()
        .map(|(name, var)| (name.as_str(), var.dims().to_vec()))
        .collect();
    let in_file: BTreeMap<&str, Vec<usize>> = saved
        .iter()
        .map(|(name, t)| (name.as_str(), t.dims().to_vec()))
        .collect();
    let names: BTreeSet<&str> = configured.keys().chain(in_file.keys()).copied().collect();
    let difference =
        names
            .into_iter()
            .find_map(|name| match (in_file.get(name), configured.get(name)) {
                (Some(a), Some(b)) if a == b => None,
                (Some(a), Some(b)) => {
                    Some(format!("`{name}` is {a:?} in the file, {b:?} configured"))
                }
                (Some(a), None) => Some(format!(
                    "the file has `{name}` {a:?}, which the configured model has not"
                )),
                (None, Some(b)) => Some(format!(
                    "the configured model's `{name}` {b:?} is not in the file"
                )),
                (None, None) => None,
            });
    if let Some(difference) = difference {
        return Err(TrainError::unreadable(
            path,
            format!(
                "the saved weights ({}) do not match the configured model size ({}): {difference}",
                shape_summary(&in_file),
                shape_summary(&configured)
            ),
        ));
    }
    for (name, var) in &vars {
        var.set(&saved[name])?;
    }
    Ok(())
}

/// A model's size as its tensor shapes show it.
fn shape_summary(tensors: &BTreeMap<&str, Vec<usize>>) -> String {
    let dim = |name: &str, axis: usize| {
        tensors
            .get(name)
            .and_then(|d| d.get(axis))
            .map_or_else(|| "?".to_string(), usize::to_string)
    };
    let layers = tensors
        .keys()
        .filter_map(|n| n.strip_prefix("layers.")?.split('.').next())
        .collect::<BTreeSet<_>>()
        .len();
    format!(
        "vocab {}, hidden_size {}, num_layers {layers}, intermediate_size {}, key/value width {}",
        dim("embed", 0),
        dim("embed", 1),
        dim("layers.0.gate", 0),
        dim("layers.0.k", 0)
    )
}

/// All trainable variables, sorted by name (a stable order for optimizers
/// and checkpoints).
pub fn sorted_vars(varmap: &VarMap) -> Vec<(String, Var)> {
    let data = varmap.data().lock().expect("varmap lock");
    let mut vars: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}
