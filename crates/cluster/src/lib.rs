//! gpuctl's cluster layer: the only crate that talks to an API server (and to Prometheus). It
//! connects ([`client::connect`]), reads kinds in bulk the one way every command shares
//! ([`lists`]: aggregated discovery, concurrent paged LISTs), reads a cluster into the core's one
//! [`gpuctl_plan::live::LiveView`] ([`read`]), applies plans ([`apply`]), runs driver upgrades with
//! their journal and Lease ([`upgrade`], [`nodeops`]), reads Helm's release storage ([`release`]),
//! runs doctor's metric queries against Prometheus ([`prometheus`]) and keeps a fleet's revision
//! stamp on each cluster ([`fleet`]); every wait and retry is bounded the one way [`wait`] says.
//! Everything it decides with
//! is a pure function of the core crate; what it shows goes through a [`report::Reporter`] the
//! binary implements.

pub mod accounting;
pub mod apply;
pub mod client;
pub mod diagnostics;
pub mod fleet;
pub mod helm;
pub mod import;
pub mod lists;
pub mod lock;
pub mod multikueue;
pub mod nodeops;
pub mod prometheus;
pub mod read;
pub mod release;
pub mod report;
pub mod upgrade;
pub mod wait;
pub mod webhook;

pub use client::{ClusterError, ConnectOptions, DEFAULT_PARALLELISM, Kube, connect};
pub use report::Reporter;
