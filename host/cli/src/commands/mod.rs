//! What each CLI subcommand does, one file each: its clap `Args` and the
//! library functions behind it (so tests run the same code paths as users).

pub mod agree;
pub mod author;
pub mod config;
pub mod plugin;
pub mod score;
#[cfg(feature = "train")]
pub mod train;
