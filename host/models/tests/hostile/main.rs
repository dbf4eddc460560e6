//! Hostile model files, in one test binary: each module builds the inputs a
//! downloaded model could bring (counts, headers, templates, tokenizers),
//! shows them refused or contained in bounded time and memory, and then
//! uses a good model in the same process. `support` holds the GGUF byte
//! builders and the counting allocator the memory bounds are read from.

mod support;

mod models;
mod templates;
mod templates_as_before;
mod tokenizers;

#[global_allocator]
static ALLOCATOR: support::Counting = support::Counting;
