//! A GGUF header read as hostile input: every length, count, offset and
//! size the file states is checked against the bytes it holds and against
//! the limits below before anything is allocated from it, and metadata
//! arrays nothing reads are stepped over, never materialized.
//!
//! candle's `Content::read` keeps every array as a `Vec<Value>`: 32 bytes
//! of memory per byte of a `u8` array, so a 50 MB array nothing reads cost
//! 1.58 GB and 20 s. The result is still candle's `Content`, so the
//! tokenizer and both loaders read it as before.

use crate::error::{ModelError, Result};
use candle_core::quantized::gguf_file::{Content, TensorInfo, Value, VersionedMagic};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

mod tensors;
use tensors::alignment;

/// Memory the whole header may take once read (metadata and tensor
/// descriptions). The largest vocabularies released (Gemma 3: 262 144
/// tokens with scores, types and merges) take under 40 MiB as candle
/// values; a quarter of a GiB leaves six times that while keeping what a
/// hostile header can make this process allocate small next to any model.
pub const MAX_METADATA_BYTES: u64 = 256 << 20;
/// Metadata entries a file may declare (released models carry under a
/// hundred).
pub const MAX_METADATA_KEYS: u64 = 1 << 16;
/// Tensors a file may declare (the largest released mixture-of-experts
/// files hold a few thousand).
pub const MAX_TENSORS: u64 = 1 << 16;
/// Longest metadata string kept (a chat template is tens of KiB).
pub const MAX_STRING_BYTES: u64 = 16 << 20;
/// Strings longer than this under keys nothing reads (an embedded
/// `tokenizer.huggingface.json`, say) are stepped over, not kept.
const UNREAD_STRING_BYTES: u64 = 64 << 10;
/// Longest metadata key (the GGUF specification's bound).
const MAX_KEY_BYTES: u64 = 65_535;
/// Longest tensor name (ggml's own is 64 bytes).
const MAX_NAME_BYTES: u64 = 256;
/// Largest `general.alignment` accepted (files use 32).
pub const MAX_ALIGNMENT: u64 = 1 << 20;
/// ggml's limit on a tensor's dimensions.
const MAX_DIMS: u32 = 4;
/// Nesting of arrays in arrays (no released key nests at all).
const MAX_DEPTH: usize = 4;
/// What a map entry costs besides its key and value (hash, control byte,
/// padding), charged so that many small keys count too.
const ENTRY_OVERHEAD: u64 = 16;

/// Reads the header of the GGUF file at `path` within the limits above.
/// Only arrays under `kept` keys are materialized; the others are absent
/// from the returned metadata.
pub(crate) fn read(path: &Path, kept: &[&str]) -> Result<(Content, File)> {
    let file = File::open(path).map_err(|e| verifine_base::FileError::io("opening", path, e))?;
    let len = file
        .metadata()
        .map_err(|e| verifine_base::FileError::io("reading", path, e))?
        .len();
    let mut header = Header {
        reader: BufReader::with_capacity(1 << 16, file),
        path,
        at: 0,
        len,
        wide: true,
        spent: 0,
    };
    let content = header.content(kept)?;
    Ok((content, header.reader.into_inner()))
}

struct Header<'a> {
    reader: BufReader<File>,
    path: &'a Path,
    /// Bytes read so far (the position in the file).
    at: u64,
    len: u64,
    /// Lengths and dimensions are u64 (GGUF v2, v3) rather than u32 (v1).
    wide: bool,
    /// Memory charged against [`MAX_METADATA_BYTES`].
    spent: u64,
}

impl Header<'_> {
    fn fail(&self, field: &str, why: impl std::fmt::Display) -> ModelError {
        ModelError::format(self.path, format!("{field}: {why}"))
    }

    fn left(&self) -> u64 {
        self.len.saturating_sub(self.at)
    }

    fn bytes<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let mut buffer = [0; N];
        self.fill(&mut buffer, field)?;
        Ok(buffer)
    }

    fn fill(&mut self, buffer: &mut [u8], field: &str) -> Result<()> {
        self.reader.read_exact(buffer).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => self.fail(field, "the file ends inside it"),
            _ => verifine_base::FileError::io("reading", self.path, e).into(),
        })?;
        self.at += buffer.len() as u64;
        Ok(())
    }

    fn u32(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes(field)?))
    }

    fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(field)?))
    }

    /// A length or count: u32 in GGUF v1, u64 after.
    fn length(&mut self, field: &str) -> Result<u64> {
        match self.wide {
            true => self.u64(field),
            false => self.u32(field).map(u64::from),
        }
    }

    fn length_size(&self) -> u64 {
        if self.wide { 8 } else { 4 }
    }

    /// Steps over `n` bytes, which must be in the file.
    fn skip(&mut self, n: u64, field: &str) -> Result<()> {
        if n > self.left() {
            return Err(self.fail(
                field,
                format!("needs {n} bytes, only {} remain in the file", self.left()),
            ));
        }
        // Within the file, so it fits in an i64.
        self.reader
            .seek_relative(n as i64)
            .map_err(|e| verifine_base::FileError::io("reading", self.path, e))?;
        self.at += n;
        Ok(())
    }

    fn charge(&mut self, bytes: u64, field: &str) -> Result<()> {
        self.spent = self.spent.saturating_add(bytes);
        if self.spent > MAX_METADATA_BYTES {
            return Err(self.fail(
                field,
                format!(
                    "the header would take more than {} MiB of memory (MAX_METADATA_BYTES)",
                    MAX_METADATA_BYTES >> 20
                ),
            ));
        }
        Ok(())
    }

    /// A string of at most `max` bytes, charged; trailing NULs dropped and
    /// invalid UTF-8 replaced, as candle reads them.
    fn string(&mut self, max: u64, field: &str) -> Result<String> {
        let n = self.length(field)?;
        self.string_of(n, max, field)
    }

    fn string_of(&mut self, n: u64, max: u64, field: &str) -> Result<String> {
        if n > max {
            return Err(self.fail(field, format!("a string of {n} bytes (at most {max})")));
        }
        if n > self.left() {
            return Err(self.fail(
                field,
                format!("a string of {n} bytes, only {} remain", self.left()),
            ));
        }
        self.charge(n, field)?;
        let mut bytes = vec![0; n as usize];
        self.fill(&mut bytes, field)?;
        while bytes.last() == Some(&0) {
            bytes.pop();
        }
        Ok(String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    fn content(&mut self, kept: &[&str]) -> Result<Content> {
        let magic = self.u32("magic")?;
        if magic != 0x4655_4747 && magic != 0x4747_5546 {
            return Err(self.fail("magic", format!("not a GGUF file (0x{magic:08x})")));
        }
        let magic = match self.u32("version")? {
            1 => VersionedMagic::GgufV1,
            2 => VersionedMagic::GgufV2,
            3 => VersionedMagic::GgufV3,
            v => return Err(self.fail("version", format!("GGUF version {v} is not supported"))),
        };
        self.wide = magic != VersionedMagic::GgufV1;
        let tensors = self.length("tensor_count")?;
        let keys = self.length("metadata_kv_count")?;
        for (field, n, max) in [
            ("tensor_count", tensors, MAX_TENSORS),
            ("metadata_kv_count", keys, MAX_METADATA_KEYS),
        ] {
            if n > max {
                return Err(self.fail(field, format!("{n} (at most {max})")));
            }
        }
        // The least each entry takes on disk: a length, a type, a byte; a
        // name, a dimension count, a type and an offset.
        let least = keys * (self.length_size() + 5) + tensors * (self.length_size() + 16);
        if least > self.left() {
            return Err(self.fail(
                "metadata_kv_count",
                format!(
                    "{keys} entries and {tensors} tensors need at least {least} bytes, only {} remain",
                    self.left()
                ),
            ));
        }
        let mut metadata = HashMap::new();
        for i in 0..keys {
            let key = self.string(MAX_KEY_BYTES, &format!("metadata key #{i}"))?;
            let kind = self.u32(&key)?;
            let keep = kept.contains(&key.as_str());
            let Some(value) = self.value(kind, &key, keep, 0)? else {
                continue;
            };
            self.charge(size_of::<Value>() as u64 + ENTRY_OVERHEAD, &key)?;
            match metadata.entry(key) {
                Entry::Occupied(e) => return Err(self.fail(e.key(), "appears twice")),
                Entry::Vacant(e) => e.insert(value),
            };
        }
        let alignment = alignment(&metadata).map_err(|why| self.fail("general.alignment", why))?;
        let mut infos = Vec::new();
        for i in 0..tensors {
            let name = self.string(MAX_NAME_BYTES, &format!("tensor #{i} name"))?;
            let info = self.tensor_info(&name)?;
            self.charge(
                name.len() as u64 + size_of::<TensorInfo>() as u64 + 64,
                &name,
            )?;
            infos.push((name, info));
        }
        let tensor_data_offset = self
            .at
            .checked_next_multiple_of(alignment)
            .filter(|&o| o <= self.len)
            .ok_or_else(|| self.fail("general.alignment", "the tensor data starts past the end"))?;
        let data = self.len - tensor_data_offset;
        let mut total = 0u64;
        let mut tensor_infos = HashMap::with_capacity(infos.len());
        for (name, info) in infos {
            let size = self.tensor_size(&name, &info)?;
            if !info.offset.is_multiple_of(alignment) {
                let why = format!("offset {} is not a multiple of {alignment}", info.offset);
                return Err(self.fail(&format!("tensor {name}"), why));
            }
            if info.offset.checked_add(size).is_none_or(|end| end > data) {
                let why = format!(
                    "{size} bytes at offset {} run past the {data} bytes of tensor data",
                    info.offset
                );
                return Err(self.fail(&format!("tensor {name}"), why));
            }
            // Tensors may not share bytes to claim more than the file holds.
            total = total.saturating_add(size);
            if total > data {
                let why = format!("the tensors need more than the {data} bytes of tensor data");
                return Err(self.fail(&format!("tensor {name}"), why));
            }
            match tensor_infos.entry(name) {
                Entry::Occupied(e) => {
                    return Err(self.fail(&format!("tensor {}", e.key()), "appears twice"));
                }
                Entry::Vacant(e) => e.insert(info),
            };
        }
        Ok(Content {
            magic,
            metadata,
            tensor_infos,
            tensor_data_offset,
        })
    }

    /// One value of type `kind`: `None` when it is stepped over (an array
    /// not `keep`, a long string nothing reads).
    fn value(&mut self, kind: u32, key: &str, keep: bool, depth: usize) -> Result<Option<Value>> {
        let value = match kind {
            0 => Value::U8(self.bytes::<1>(key)?[0]),
            1 => Value::I8(self.bytes::<1>(key)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.bytes(key)?)),
            3 => Value::I16(i16::from_le_bytes(self.bytes(key)?)),
            4 => Value::U32(self.u32(key)?),
            5 => Value::I32(i32::from_le_bytes(self.bytes(key)?)),
            6 => Value::F32(f32::from_le_bytes(self.bytes(key)?)),
            7 => match self.bytes::<1>(key)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.fail(key, format!("{b} is not a boolean"))),
            },
            8 => {
                let n = self.length(key)?;
                if !keep && n > UNREAD_STRING_BYTES {
                    self.skip(n, key)?;
                    return Ok(None);
                }
                Value::String(self.string_of(n, MAX_STRING_BYTES, key)?)
            }
            9 => {
                let kind = self.u32(key)?;
                let n = self.length(key)?;
                let least = self.least_size(kind, key)?;
                if n.checked_mul(least).is_none_or(|b| b > self.left()) {
                    let why = format!(
                        "an array of {n} elements, only {} bytes remain",
                        self.left()
                    );
                    return Err(self.fail(key, why));
                }
                if depth >= MAX_DEPTH {
                    return Err(self.fail(key, format!("arrays nest deeper than {MAX_DEPTH}")));
                }
                if !keep {
                    self.skip_array(kind, n, key, depth + 1)?;
                    return Ok(None);
                }
                // Charged before the vector is allocated; each element's
                // own strings are charged as they are read.
                self.charge(n.saturating_mul(size_of::<Value>() as u64), key)?;
                let mut values = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    // Kept values are never stepped over: always `Some`.
                    values.extend(self.value(kind, key, true, depth + 1)?);
                }
                Value::Array(values)
            }
            10 => Value::U64(self.u64(key)?),
            11 => Value::I64(i64::from_le_bytes(self.bytes(key)?)),
            12 => Value::F64(f64::from_le_bytes(self.bytes(key)?)),
            other => return Err(self.fail(key, format!("unknown value type {other}"))),
        };
        Ok(Some(value))
    }

    /// The fewest bytes one value of `kind` takes on disk.
    fn least_size(&self, kind: u32, key: &str) -> Result<u64> {
        Ok(match kind {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => self.length_size(),
            9 => 4 + self.length_size(),
            other => return Err(self.fail(key, format!("unknown value type {other}"))),
        })
    }

    /// Steps over `n` values of `kind` without keeping them: fixed-size
    /// ones in one seek, strings by their lengths, arrays recursively.
    fn skip_array(&mut self, kind: u32, n: u64, key: &str, depth: usize) -> Result<()> {
        match kind {
            8 => {
                for _ in 0..n {
                    let len = self.length(key)?;
                    self.skip(len, key)?;
                }
            }
            9 => {
                for _ in 0..n {
                    self.value(9, key, false, depth)?;
                }
            }
            _ => {
                let bytes = n.checked_mul(self.least_size(kind, key)?);
                self.skip(bytes.unwrap_or(u64::MAX), key)?;
            }
        }
        Ok(())
    }
}
