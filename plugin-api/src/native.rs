//! The native fast path: the same plugin logic as a host-target `cdylib`
//! that the host loads with `dlopen` instead of a sandboxed component.
//!
//! A native plugin runs inside the host's process with the host's
//! privileges: no memory cap, no time limit, no isolation. Hosts load one
//! only when the user opts in (`verifine score --allow-native`). What this
//! module adds over the component path is only transport: arguments and
//! results cross the C ABI in postcard (compact binary serde) (see [`verifine_native_abi`]), and a panic
//! is caught here and reported as [`STATUS_PANIC`], never unwound into the
//! host.
//!
//! Plugin authors use [`export_native_plugin!`](crate::export_native_plugin)
//! and nothing else from here.

use crate::{
    __private, Aggregator, Candidate, Context, Curriculum, MonitorPoint, Rubric, Sample, Scoring,
    Trigger,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::panic::{AssertUnwindSafe, catch_unwind};

pub use verifine_native_abi::{
    CALL_AGGREGATE, CALL_CHECK, CALL_DESCRIBE, CALL_JUDGE, CALL_SELECT, NativeBuffer,
    NativePluginV0, STATUS_ERROR, STATUS_OK, STATUS_PANIC, TABLE_VERSION, parse_version,
};

/// The `kind` codes by the names `export_native_plugin!` takes, so the macro
/// can map `rubric:` to its code without a lookup table.
#[allow(
    non_upper_case_globals,
    reason = "the names are the macro's keywords (`rubric:`), matched as written"
)]
pub mod kind {
    /// A rubric.
    pub const rubric: u32 = verifine_native_abi::KIND_RUBRIC;
    /// A rubric on the fast path (a rubric to the host).
    pub const rubric_in_place: u32 = verifine_native_abi::KIND_RUBRIC;
    /// An aggregator.
    pub const aggregator: u32 = verifine_native_abi::KIND_AGGREGATOR;
    /// A curriculum.
    pub const curriculum: u32 = verifine_native_abi::KIND_CURRICULUM;
    /// A trigger.
    pub const trigger: u32 = verifine_native_abi::KIND_TRIGGER;
}

/// One function of one kind: the encoded result, or why it could not run.
type Dispatch = fn(u32, &[u8]) -> Result<Vec<u8>, String>;

/// The body of the exported `call`: runs `dispatch` with a caught panic and
/// hands the output to the host in a buffer only [`free`] may release.
///
/// # Safety
/// `input` must point to `input_len` readable bytes (or be null with length
/// 0) and `output` must be valid for one write, as the ABI requires.
pub unsafe fn call(
    function: u32,
    input: *const u8,
    input_len: usize,
    output: *mut NativeBuffer,
    dispatch: Dispatch,
) -> i32 {
    if output.is_null() {
        return STATUS_ERROR;
    }
    let input = if input.is_null() || input_len == 0 {
        &[][..]
    } else {
        // SAFETY: the caller guarantees `input_len` readable bytes at `input`.
        unsafe { std::slice::from_raw_parts(input, input_len) }
    };
    let (status, bytes) = match catch_unwind(AssertUnwindSafe(|| dispatch(function, input))) {
        Ok(Ok(bytes)) => (STATUS_OK, bytes),
        Ok(Err(message)) => (STATUS_ERROR, message.into_bytes()),
        Err(payload) => (STATUS_PANIC, panic_message(&*payload).into_bytes()),
    };
    let mut bytes = std::mem::ManuallyDrop::new(bytes);
    // SAFETY: `output` is non-null and the caller guarantees it is writable.
    unsafe {
        output.write(NativeBuffer {
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            cap: bytes.capacity(),
        })
    };
    status
}

/// The exported `free`: releases a buffer [`call`] produced.
///
/// # Safety
/// `buffer` must come unchanged from this plugin's `call`, and be freed once.
pub unsafe extern "C" fn free(buffer: NativeBuffer) {
    if !buffer.ptr.is_null() {
        // SAFETY: the buffer was a `Vec<u8>` of this allocator, leaked by `call`.
        drop(unsafe { Vec::from_raw_parts(buffer.ptr, buffer.len, buffer.cap) });
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)");
    format!("panicked: {text}")
}

fn args<T: DeserializeOwned>(input: &[u8]) -> Result<(Context, T), String> {
    postcard::from_bytes(input).map_err(|e| format!("undecodable input: {e}"))
}

fn encode(value: &impl Serialize) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(value).map_err(|e| format!("unencodable result: {e}"))
}

fn no_such_function(kind: &str, function: u32) -> String {
    format!("a {kind} plugin has no function {function}")
}

/// Dispatch of a rubric: `describe` and `judge`.
pub fn rubric<R: Rubric>(function: u32, input: &[u8]) -> Result<Vec<u8>, String> {
    match function {
        CALL_DESCRIBE => encode(&R::describe()),
        CALL_JUDGE => {
            let (ctx, samples) = args::<Vec<Sample>>(input)?;
            encode(&__private::judge::<R>(&ctx, &samples))
        }
        other => Err(no_such_function("rubric", other)),
    }
}

/// Dispatch of a rubric on the fast path ([`crate::RubricInPlace`]): the
/// samples after the context are read in place, as a component reads them.
pub fn rubric_in_place<R: crate::RubricInPlace>(
    function: u32,
    input: &[u8],
) -> Result<Vec<u8>, String> {
    match function {
        CALL_JUDGE => {
            let (ctx, samples) = postcard::take_from_bytes::<Context>(input)
                .map_err(|e| format!("undecodable input: {e}"))?;
            let config = __private::config::<R::Config>(&ctx);
            let mut answer = Vec::new();
            let mut scratch = crate::in_place::Scratch::default();
            crate::in_place::judge_packed::<R>(&config, &ctx, samples, &mut scratch, &mut answer)
                .map_err(|e| format!("undecodable input: {e}"))?;
            Ok(answer)
        }
        other => rubric::<R>(other, input),
    }
}

/// Dispatch of an aggregator: `aggregate`.
pub fn aggregator<A: Aggregator>(function: u32, input: &[u8]) -> Result<Vec<u8>, String> {
    match function {
        CALL_AGGREGATE => {
            let (ctx, items) = args::<Vec<Scoring>>(input)?;
            encode(&__private::aggregate::<A>(ctx, items))
        }
        other => Err(no_such_function("aggregator", other)),
    }
}

/// Dispatch of a curriculum: `select`.
pub fn curriculum<C: Curriculum>(function: u32, input: &[u8]) -> Result<Vec<u8>, String> {
    match function {
        CALL_SELECT => {
            let (ctx, candidates) = args::<Vec<Candidate>>(input)?;
            encode(&__private::select::<C>(ctx, candidates))
        }
        other => Err(no_such_function("curriculum", other)),
    }
}

/// Dispatch of a trigger: `check`.
pub fn trigger<T: Trigger>(function: u32, input: &[u8]) -> Result<Vec<u8>, String> {
    match function {
        CALL_CHECK => {
            let (ctx, history) = args::<Vec<MonitorPoint>>(input)?;
            encode(&__private::check::<T>(ctx, history))
        }
        other => Err(no_such_function("trigger", other)),
    }
}

/// The table `export_native_plugin!` exports; `name` and `version` must be
/// NUL-terminated.
pub const fn table(
    api_version: &str,
    kind: u32,
    name: &'static str,
    version: &'static str,
    call: verifine_native_abi::CallFn,
) -> NativePluginV0 {
    let [api_major, api_minor, api_patch] = parse_version(api_version);
    assert!(
        !name.is_empty() && name.as_bytes()[name.len() - 1] == 0,
        "name must be NUL-terminated"
    );
    assert!(
        !version.is_empty() && version.as_bytes()[version.len() - 1] == 0,
        "version must be NUL-terminated"
    );
    NativePluginV0 {
        table_version: TABLE_VERSION,
        api_major,
        api_minor,
        api_patch,
        kind,
        name: name.as_ptr().cast(),
        version: version.as_ptr().cast(),
        call,
        free,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dispatch: Dispatch, function: u32, input: &[u8]) -> (i32, String) {
        let mut out = NativeBuffer::empty();
        // SAFETY: `input` is a live slice and `out` an empty buffer, as the
        // host passes them.
        let status = unsafe { call(function, input.as_ptr(), input.len(), &mut out, dispatch) };
        // SAFETY: `call` filled `out` with `len` initialized bytes.
        let bytes = unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec();
        let text = String::from_utf8(bytes).unwrap();
        // SAFETY: `out` came from `call` and is freed once, as the host does.
        unsafe { free(out) };
        (status, text)
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let (status, text) = run(|_, _| panic!("boom"), 0, b"");
        assert_eq!(status, STATUS_PANIC);
        assert_eq!(text, "panicked: boom");
    }

    #[test]
    fn bad_input_and_unknown_functions_are_errors() {
        let (status, text) = run(rubric::<Nothing>, CALL_JUDGE, b"[1,");
        assert_eq!(status, STATUS_ERROR);
        assert!(text.starts_with("undecodable input"), "{text}");
        let (status, text) = run(rubric::<Nothing>, CALL_CHECK, b"");
        assert_eq!(status, STATUS_ERROR);
        assert!(text.contains("no function 4"), "{text}");
    }

    struct Nothing;
    impl Rubric for Nothing {
        type Config = crate::NoConfig;
        fn describe() -> crate::RubricInfo {
            crate::RubricInfo::new("nothing", "0.0.0")
        }
        fn judge(_: &crate::NoConfig, _: &Context, _: &Sample) -> Result<crate::Judgment, String> {
            Err("nothing".into())
        }
    }
}
