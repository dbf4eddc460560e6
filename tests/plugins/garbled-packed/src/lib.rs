//! A 0.3 rubric built with wit-bindgen alone (the SDK would always answer
//! well-formed bytes): `judge-packed` answers bytes that do not decode (an
//! impossible length prefix) unless the first sample's response is "short",
//! where it answers one well-formed result whatever the batch's size. The host must name the contract
//! breach, discard the store and never trust a partial answer.

wit_bindgen::generate!({ world: "rubric", path: "../../../wit/v0.3" });

use exports::verifine::plugin::rubric_plugin::{Guest, SampleFields};
use verifine::plugin::types::{Context, Judgment, RubricInfo, Sample};

struct Garbled;

impl Guest for Garbled {
    fn describe() -> RubricInfo {
        RubricInfo {
            name: "hostile-garbled-packed".into(),
            version: "0.1.0".into(),
            criteria: Vec::new(),
        }
    }

    fn judge(_: Context, samples: Vec<Sample>) -> Vec<Result<Judgment, String>> {
        samples.iter().map(|_| Err("unused".into())).collect()
    }

    fn reads() -> SampleFields {
        SampleFields::RESPONSE
    }

    fn judge_packed(_: Context, samples: Vec<u8>) -> Vec<u8> {
        // postcard: a list is a varint length, then its items; the first
        // sample's id and prompt (empty: unread) come before its response.
        let id_len = usize::from(samples[1]);
        let response = &samples[2 + id_len + 1..];
        if response.get(1..6) == Some(&b"short"[..]) {
            // Well formed, but one result (an `Err("x")`) for every batch.
            vec![1, 1, 1, b'x']
        } else {
            vec![0xff; 11]
        }
    }
}

// The exports exist only in the component, as the SDK's macro does it: a
// host build (the workspace's tests) links a cdylib, and the linker refuses
// export names that hold ':'.
#[cfg(target_arch = "wasm32")]
export!(Garbled);

/// The metadata section the host reads before compiling.
#[used]
#[unsafe(link_section = "verifine-plugin")]
static METADATA: [u8; 72] =
    *b"api-version=0.3.0\nkind=rubric\nname=hostile-garbled-packed\nversion=0.1.0\n";
