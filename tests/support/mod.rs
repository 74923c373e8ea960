//! Shared helpers for integration tests (`mod support;`); cluster tests use `support::cluster`,
//! and those that plan and apply `support::fixture`.
pub mod cluster;
pub mod doctor;
pub mod fixture;
pub mod fresh;
pub mod standin_chart;
