//! The plugin runtime: one engine, sandboxed stores, version-checked loading
//! and provenance for every result. Knows nothing of training.

#[allow(missing_docs)] // generated from wit/, documented there
pub mod bindings;
pub mod builtin;
pub mod engine;
pub mod host_state;
pub mod instance;
pub mod metadata;
pub mod native;
pub mod plugin;

pub use bindings::*;
pub use instance::{PluginError, PluginInstance};
pub use metadata::{HOST_API_VERSION, PluginKind, PluginMetadata};
pub use native::NativePlugin;
pub use plugin::{Limits, Plugin, Provenance, Runtime, spec_bytes};
