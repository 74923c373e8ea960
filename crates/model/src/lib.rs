//! gpuctl's model: what every other crate reads and nothing here reaches above. The blueprint
//! (types, loader with source spans, overlays, JSON Schema), the facts catalog (`profiles/`), the
//! names gpuctl writes on live objects, quantities and versions, located findings and the registry
//! of every finding id with its four rule tables, secret masking, bounded input.
//!
//! Pure: no network, terminal or async runtime (tests/offline/architecture.rs checks the
//! dependency tree), and it depends on no other gpuctl crate.

pub mod applyset;
pub mod blueprint;
pub mod finding;
pub mod input;
pub mod located;
pub mod names;
pub mod object;
pub mod profiles;
pub mod promql;
pub mod quantity;
pub mod redact;
pub mod suggest;
#[doc(hidden)]
pub mod testgen;
pub mod version;
