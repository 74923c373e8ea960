//! What a panic prints: Rust's own message, which names the failing place (`file:line:column`,
//! compiled in without debug info), then how to report it. The release binary keeps its symbols
//! but no debug info (issue 27), so `RUST_BACKTRACE=1` names every function on the way;
//! `docs/bug-reports.md` says how to get file and line for every frame too.

/// Installs the hook; call once, first thing in `main`.
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        eprintln!(
            "gpuctl {} stopped on a bug (the lines above say where). Please report it with those lines, \
             the command you ran and, if you can, its output again with RUST_BACKTRACE=1 \
             (docs/bug-reports.md).",
            env!("CARGO_PKG_VERSION")
        );
    }));
}
