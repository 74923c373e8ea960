//! The `gpuctl` binary: parse, run, map the status to an exit code.

/// See the `mimalloc` entry in Cargo.toml for why the binary does not use the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    gpuctl::panic_report::install();
    std::process::ExitCode::from(gpuctl::run(std::env::args_os()).code())
}
