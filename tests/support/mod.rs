//! Shared helpers for integration tests (`mod support;`); cluster tests use `support::cluster`.
pub mod cluster;
