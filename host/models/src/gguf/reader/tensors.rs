//! The tensor half of a GGUF header: each tensor's dimensions, type and
//! offset checked (at most four non-empty dimensions whose product fits,
//! a known type, whole blocks along each row) before its size is computed
//! with checked arithmetic, and `general.alignment` bounded.

use super::{Header, MAX_ALIGNMENT, MAX_DIMS};
use crate::error::Result;
use candle_core::quantized::GgmlDType;
use candle_core::quantized::gguf_file::{TensorInfo, Value};
use std::collections::HashMap;

impl Header<'_> {
    pub(super) fn tensor_info(&mut self, name: &str) -> Result<TensorInfo> {
        let field = format!("tensor {name}");
        let n_dims = self.u32(&field)?;
        if !(1..=MAX_DIMS).contains(&n_dims) {
            let why = format!("{n_dims} dimensions (1 to {MAX_DIMS})");
            return Err(self.fail(&field, why));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut elements = 1u64;
        for _ in 0..n_dims {
            let d = self.length(&field)?;
            elements = elements
                .checked_mul(d)
                .filter(|&e| d > 0 && e <= i64::MAX as u64)
                .ok_or_else(|| {
                    self.fail(&field, format!("dimension {d} (empty or overflowing)"))
                })?;
            dims.push(d as usize);
        }
        // GGUF lists the innermost dimension first; candle the outermost.
        dims.reverse();
        let code = self.u32(&field)?;
        let ggml_dtype = dtype(code).ok_or_else(|| self.fail(&field, format!("type {code}")))?;
        let offset = self.u64(&field)?;
        Ok(TensorInfo {
            ggml_dtype,
            shape: dims.into(),
            offset,
        })
    }

    /// The bytes `info` takes: whole blocks of its type along each row.
    pub(super) fn tensor_size(&self, name: &str, info: &TensorInfo) -> Result<u64> {
        let dims = info.shape.dims();
        let block = info.ggml_dtype.block_size();
        let row = dims.last().copied().unwrap_or(0);
        if !row.is_multiple_of(block) {
            let why = format!(
                "rows of {row} are not whole blocks of {block} ({:?})",
                info.ggml_dtype
            );
            return Err(self.fail(&format!("tensor {name}"), why));
        }
        // Dimensions were checked: their product fits in an i64.
        let elements = dims.iter().map(|&d| d as u64).product::<u64>();
        (elements / block as u64)
            .checked_mul(info.ggml_dtype.type_size() as u64)
            .ok_or_else(|| self.fail(&format!("tensor {name}"), "its size overflows"))
    }
}

/// `general.alignment`: a power of two up to [`MAX_ALIGNMENT`], 32 when
/// absent.
pub(super) fn alignment(metadata: &HashMap<String, Value>) -> std::result::Result<u64, String> {
    let value = match metadata.get("general.alignment") {
        None => return Ok(32),
        Some(Value::U8(v)) => u64::from(*v),
        Some(Value::U16(v)) => u64::from(*v),
        Some(Value::U32(v)) => u64::from(*v),
        Some(Value::U64(v)) => *v,
        Some(Value::I8(v)) => u64::try_from(*v).unwrap_or(0),
        Some(Value::I16(v)) => u64::try_from(*v).unwrap_or(0),
        Some(Value::I32(v)) => u64::try_from(*v).unwrap_or(0),
        Some(Value::I64(v)) => u64::try_from(*v).unwrap_or(0),
        Some(other) => return Err(format!("{other:?} is not an integer")),
    };
    if value == 0 || !value.is_power_of_two() || value > MAX_ALIGNMENT {
        return Err(format!(
            "{value} is not a power of two between 1 and {MAX_ALIGNMENT}"
        ));
    }
    Ok(value)
}

/// ggml's type codes (candle's own mapping is private to it).
fn dtype(code: u32) -> Option<GgmlDType> {
    use GgmlDType::*;
    Some(match code {
        0 => F32,
        1 => F16,
        2 => Q4_0,
        3 => Q4_1,
        6 => Q5_0,
        7 => Q5_1,
        8 => Q8_0,
        9 => Q8_1,
        10 => Q2K,
        11 => Q3K,
        12 => Q4K,
        13 => Q5K,
        14 => Q6K,
        15 => Q8K,
        30 => BF16,
        _ => return None,
    })
}
