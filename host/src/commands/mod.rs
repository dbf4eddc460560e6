//! What each CLI subcommand does, as library functions (so tests run the
//! same code paths as users).

pub mod agree;
pub mod author;
pub mod config;
pub mod plugin;
pub mod score;
