//! Marks tests that need outside parts `ignored` when those parts are missing, so a local
//! `cargo test` reports them as `ignored, skipped: needs ...` (and counts them in each summary
//! line) instead of passing them silently:
//!
//! - cluster tests carry `#[needs_test_cluster]`, that is `#[cfg_attr(gpuctl_no_test_cluster,
//!   ignore = "...")]`: set when no test API server is configured (`GPUCTL_TEST_KUBECONFIG`);
//! - Prometheus tests carry `#[needs_prometheus]` (`gpuctl_no_prometheus`): set when
//!   `prometheus` or `promtool` is not on `PATH` (Debian's `prometheus` package has both);
//! - the browser check of the status picture carries `#[needs_chromium]` (`gpuctl_no_chromium`):
//!   set when Debian's `chromium` is not on `PATH` (or named by `CHROMIUM`);
//! - the differential policy tests carry `#[needs_conftest]` (`gpuctl_no_conftest`): set when no
//!   conftest binary is found: `GPUCTL_CONFTEST` (the harness's env file exports it), or the
//!   harness's cache, `$GPUCTL_KUBE_CACHE` or `~/.cache/gpuctl/kube`, `conftest-v0.71.1/conftest`.
//!
//! The attributes, with the reasons they print, are in `tests/skip/src/lib.rs`.
//!
//! In CI (`CI` or `GPUCTL_REQUIRE_CLUSTER` set) none is set: the tests run, and fail when what
//! they need is missing.

use std::path::Path;

fn set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| Path::new(&dir).join(program).is_file())
    })
}

/// `CHROMIUM` names a file, or `chromium` / `chromium-browser` is on PATH.
fn chromium_found() -> bool {
    std::env::var_os("CHROMIUM").is_some_and(|p| Path::new(&p).is_file())
        || on_path("chromium")
        || on_path("chromium-browser")
}

/// The conftest the differential tests run (tests/external/policy_conftest.rs finds it the same way).
fn conftest_found() -> bool {
    if let Some(p) = std::env::var_os("GPUCTL_CONFTEST").filter(|p| !p.is_empty()) {
        return Path::new(&p).is_file();
    }
    let cache = std::env::var_os("GPUCTL_KUBE_CACHE")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/gpuctl/kube")));
    cache.is_some_and(|c| c.join("conftest-v0.71.1/conftest").is_file())
}

fn main() {
    for var in [
        "GPUCTL_TEST_KUBECONFIG",
        "CI",
        "GPUCTL_REQUIRE_CLUSTER",
        "PATH",
        "CHROMIUM",
        "GPUCTL_CONFTEST",
        "GPUCTL_KUBE_CACHE",
        "HOME",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(gpuctl_no_test_cluster)");
    println!("cargo::rustc-check-cfg=cfg(gpuctl_no_prometheus)");
    println!("cargo::rustc-check-cfg=cfg(gpuctl_no_chromium)");
    println!("cargo::rustc-check-cfg=cfg(gpuctl_no_conftest)");
    let required = set("CI") || set("GPUCTL_REQUIRE_CLUSTER");
    let configured = std::env::var_os("GPUCTL_TEST_KUBECONFIG").is_some_and(|v| !v.is_empty());
    if !configured && !required {
        println!("cargo::rustc-cfg=gpuctl_no_test_cluster");
    }
    if (!on_path("prometheus") || !on_path("promtool")) && !required {
        println!("cargo::rustc-cfg=gpuctl_no_prometheus");
    }
    if !chromium_found() && !required {
        println!("cargo::rustc-cfg=gpuctl_no_chromium");
    }
    if !conftest_found() && !required {
        println!("cargo::rustc-cfg=gpuctl_no_conftest");
    }
}
