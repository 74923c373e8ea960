//! The `gpuctl` binary: parse, run, map the status to an exit code.

/// See the `mimalloc` entry in Cargo.toml for why the binary does not use the system allocator;
/// [`gpuctl::memory::Budgeted`] counts what a policy evaluation allocates (its memory budget).
#[global_allocator]
static ALLOCATOR: gpuctl::memory::Budgeted<mimalloc::MiMalloc> =
    gpuctl::memory::Budgeted(mimalloc::MiMalloc);

fn main() -> std::process::ExitCode {
    gpuctl::panic_report::install();
    std::process::ExitCode::from(gpuctl::run(std::env::args_os()).code())
}
