//! Weights on disk (safetensors, written atomically) and the stable order of
//! trainable variables.

use crate::error::{Result, TrainError};
use candle_core::Var;
use candle_nn::VarMap;
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

/// All trainable variables, sorted by name (a stable order for optimizers
/// and checkpoints).
pub fn sorted_vars(varmap: &VarMap) -> Vec<(String, Var)> {
    let data = varmap.data().lock().expect("varmap lock");
    let mut vars: Vec<(String, Var)> = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}
