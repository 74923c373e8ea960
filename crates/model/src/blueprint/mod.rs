//! The blueprint: its contract (`model`), its YAML source with positions (`yaml`) and the loader.

pub mod accounting;
pub mod dra;
mod install;
mod load;
pub mod model;
pub mod network;
pub mod origin;
pub mod overlay;
pub mod provisioning;
pub mod resources;
mod scalars;
pub mod schema;
mod strict;
pub mod yaml;

pub use load::{
    Broken, Loaded, Partial, load_bytes, load_bytes_in, load_bytes_partial, load_file,
    load_file_in, load_str, load_str_partial,
};
pub use model::*;
pub use network::{
    DevicePlugin, DevicePluginKind, IpPool, IpPoolKind, IpRange, NetworkOperator, NicDriver,
    NicDriverSource, SecondaryNetwork, SecondaryNetworkKind,
};
pub use overlay::Layer;
