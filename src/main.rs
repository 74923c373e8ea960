//! The `gpuctl` binary: parse, run, map the status to an exit code.

fn main() -> std::process::ExitCode {
    gpuctl::panic_report::install();
    std::process::ExitCode::from(gpuctl::run(std::env::args_os()).code())
}
