//! The command line: clap types (`args`) and their resolution into plain settings (`settings`).

pub mod args;
pub mod settings;
