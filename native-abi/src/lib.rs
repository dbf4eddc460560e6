//! The C-ABI table a native verifine plugin exports, shared by the guest SDK
//! (which fills it in) and the host (which checks and calls it).
//!
//! Native plugins are a trusted fast path: a `cdylib` loaded in the host's
//! process, with none of the WebAssembly sandbox's isolation, memory cap or
//! time limit. The contract is the same as for components (the same four
//! kinds, the same records); only the transport differs: arguments and
//! results cross the boundary in postcard (compact binary serde of the
//! WIT records, fields in WIT order), in buffers the plugin allocates and
//! frees itself, so host and plugin never share an allocator.
//!
//! The layout here is frozen for [`TABLE_VERSION`] 0. The first field of every
//! table version is `table_version: u32`, so a host can read it before it
//! trusts the rest of the layout.

#![no_std]
#![warn(missing_docs)]

use core::ffi::c_char;

/// The symbol a native plugin exports: `extern "C" fn() -> *const NativePluginV0`.
/// A new table layout gets a new symbol as well as a new `table_version`.
pub const SYMBOL: &str = "verifine_native_plugin_v0";

/// The layout version of [`NativePluginV0`].
pub const TABLE_VERSION: u32 = 0;

/// `kind` of a rubric plugin.
pub const KIND_RUBRIC: u32 = 0;
/// `kind` of an aggregator plugin.
pub const KIND_AGGREGATOR: u32 = 1;
/// `kind` of a curriculum plugin.
pub const KIND_CURRICULUM: u32 = 2;
/// `kind` of a trigger plugin.
pub const KIND_TRIGGER: u32 = 3;

/// `function` for a rubric's `describe` (input: the encoding of `()`, i.e. empty).
pub const CALL_DESCRIBE: u32 = 0;
/// `function` for a rubric's `judge` (input: the tuple `(context, samples)`).
pub const CALL_JUDGE: u32 = 1;
/// `function` for an aggregator's `aggregate` (input: the tuple `(context, items)`).
pub const CALL_AGGREGATE: u32 = 2;
/// `function` for a curriculum's `select` (input: the tuple `(context, candidates)`).
pub const CALL_SELECT: u32 = 3;
/// `function` for a trigger's `check` (input: the tuple `(context, history)`).
pub const CALL_CHECK: u32 = 4;

/// `call` returned the function's result, encoded, shaped as the WIT export's
/// result (e.g. `judge`: a list of `Result<Judgment, String>`).
pub const STATUS_OK: i32 = 0;
/// `call` could not run the function (unknown function for this kind,
/// undecodable input); the output holds a UTF-8 message.
pub const STATUS_ERROR: i32 = 1;
/// The function panicked; the panic was caught and the output holds its
/// UTF-8 message. Nothing unwinds across the boundary.
pub const STATUS_PANIC: i32 = 2;

/// Bytes allocated by the plugin and handed to the host, which reads them and
/// gives them back through [`NativePluginV0::free`]: only the allocator that
/// made a buffer may release it.
#[repr(C)]
#[derive(Debug)]
pub struct NativeBuffer {
    /// Start of the bytes (null for an empty buffer).
    pub ptr: *mut u8,
    /// Number of initialized bytes.
    pub len: usize,
    /// Allocated capacity, needed to release the allocation.
    pub cap: usize,
}

impl NativeBuffer {
    /// An empty buffer, for the host to pass as `output` before a call.
    pub const fn empty() -> Self {
        NativeBuffer {
            ptr: core::ptr::null_mut(),
            len: 0,
            cap: 0,
        }
    }
}

/// Runs one function of the plugin: `function` is a `CALL_*` code, the input
/// is `input_len` encoded bytes, the result (or a message) is written to
/// `output`, and the return value is a `STATUS_*` code.
pub type CallFn = unsafe extern "C" fn(
    function: u32,
    input: *const u8,
    input_len: usize,
    output: *mut NativeBuffer,
) -> i32;

/// Releases a buffer the plugin wrote into `output`.
pub type FreeFn = unsafe extern "C" fn(buffer: NativeBuffer);

/// What a native plugin says about itself, and how to call it. Version 0 of
/// the layout; the host checks `table_version` and the contract version
/// before it calls anything.
#[repr(C)]
#[derive(Debug)]
pub struct NativePluginV0 {
    /// Always [`TABLE_VERSION`] (0) for this layout; read first.
    pub table_version: u32,
    /// Major version of the `verifine:plugin` contract the SDK was built with.
    pub api_major: u32,
    /// Minor version of the contract.
    pub api_minor: u32,
    /// Patch version of the contract.
    pub api_patch: u32,
    /// One of the `KIND_*` codes.
    pub kind: u32,
    /// The plugin crate's name, NUL-terminated, static.
    pub name: *const c_char,
    /// The plugin crate's version, NUL-terminated, static.
    pub version: *const c_char,
    /// Runs one function; see [`CallFn`].
    pub call: CallFn,
    /// Releases an output buffer; see [`FreeFn`].
    pub free: FreeFn,
}

// SAFETY: the table is immutable and its pointers refer to immutable statics
// of the plugin, so sharing it between threads is sound.
unsafe impl Sync for NativePluginV0 {}

/// Parses `MAJOR.MINOR.PATCH` at compile time, so the table carries the same
/// contract version string the component metadata stamps. Panics (a compile
/// error in a const context) on anything else.
pub const fn parse_version(text: &str) -> [u32; 3] {
    let bytes = text.as_bytes();
    let mut parts = [0u32; 3];
    let mut part = 0;
    let mut digits = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'.' {
            assert!(digits > 0 && part < 2, "version must be MAJOR.MINOR.PATCH");
            part += 1;
            digits = 0;
        } else {
            assert!(b.is_ascii_digit(), "version must be MAJOR.MINOR.PATCH");
            parts[part] = parts[part] * 10 + (b - b'0') as u32;
            digits += 1;
        }
        i += 1;
    }
    assert!(digits > 0 && part == 2, "version must be MAJOR.MINOR.PATCH");
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!(parse_version("0.1.0"), [0, 1, 0]);
        assert_eq!(parse_version("12.34.5"), [12, 34, 5]);
    }

    #[test]
    #[should_panic]
    fn refuses_partial_versions() {
        parse_version("1.2");
    }

    #[test]
    fn table_version_is_the_first_field() {
        assert_eq!(core::mem::offset_of!(NativePluginV0, table_version), 0);
    }
}
