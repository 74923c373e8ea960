//! gpuctl's pure core. Data flow: blueprint --load--> [`blueprint::Loaded`] --validate (profiles)-->
//! [`validate::ValidatedBlueprint`] --render--> [`render::RenderedSet`] --with a [`live::LiveView`]-->
//! [`plan::Plan`]; an upgrade goes [`upgrade::preflight`] --> [`upgrade::schedule`] --> runbook.
//!
//! Nothing here talks to a network, a terminal or an async runtime: the crate does not depend on
//! them (tests/offline/architecture.rs checks `cargo metadata`). It reads input files only through
//! [`input`] (bounded, never written). The cluster crate fills a [`live::LiveView`]; everything
//! decided from it is a pure function here.

pub mod applyset;
pub mod blueprint;
pub mod cel;
pub mod diagnostics;
pub mod doctor;
pub mod finding;
pub mod fleet;
pub mod import;
pub mod input;
pub mod journal;
pub mod live;
pub mod located;
pub mod lock;
pub mod metrics;
pub mod names;
pub mod object;
pub mod plan;
pub mod profiles;
pub mod quantity;
pub mod render;
pub mod snapshot;
pub mod status;
pub mod suggest;
#[doc(hidden)]
pub mod testgen;
pub mod upgrade;
pub mod validate;
pub mod version;
