//! gpuctl's pipeline: a loaded blueprint --validate (the facts catalog)--> [`validate::ValidatedBlueprint`]
//! --render (templates/)--> [`render::RenderedSet`]. CEL (`cel`) is the expression language the
//! validation and the rendered admission policies share.
//!
//! Pure; depends only on `gpuctl-model`.

pub mod cel;
pub mod extended;
pub mod render;
pub mod validate;
