//! The blueprint: its contract (`model`), its YAML source with positions (`yaml`) and the loader.

mod load;
pub mod model;
pub mod resources;
mod strict;
pub mod yaml;

pub use load::{Loaded, load_bytes, load_file, load_str};
pub use model::*;
