//! Generated inputs for benchmarks and scale tests: the blueprints of `gpuctl_model::testgen` and
//! the Day-2 cluster of the shipped example ([`day2`]). Not part of the public interface.

pub use gpuctl_model::testgen::*;

pub mod day2;
