//! Helpers shared by the judge's integration tests.
#![allow(dead_code)]

pub mod llama;
