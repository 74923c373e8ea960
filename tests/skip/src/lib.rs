//! The attributes that mark an integration test `ignored` where what it needs is missing, so a
//! local `cargo test` lists it as `ignored, skipped: needs ...` (and counts it in the summary line)
//! instead of passing it silently. Each one stands for the `cfg_attr` that was written out on every
//! such test before, with its reason in this one place:
//!
//! ```ignore
//! #[needs_test_cluster]   // = #[cfg_attr(gpuctl_no_test_cluster, ignore = "skipped: needs the test API server (docs/testing.md)")]
//! #[tokio::test]
//! async fn my_cluster_test() { ... }
//! ```
//!
//! The cfgs are set by the root package's `build.rs`: `gpuctl_no_test_cluster` when no test API
//! server is configured (`GPUCTL_TEST_KUBECONFIG`), `gpuctl_no_prometheus` when `prometheus` or
//! `promtool` is not on `PATH`, `gpuctl_no_chromium` when Debian's `chromium` is not found,
//! `gpuctl_no_conftest` when no conftest binary is found (`GPUCTL_CONFTEST`, or the harness's cache
//! `~/.cache/gpuctl/kube/conftest-v0.71.1/conftest`); none in CI (`CI` or
//! `GPUCTL_REQUIRE_CLUSTER`), where the tests run and fail without what they need.
//!
//! The attribute goes above `#[test]` / `#[tokio::test]`: the test harness reads `ignore` when
//! `#[test]` expands, so it must be there by then. Below it, it would come too late; it refuses to
//! compile there instead (it sees no test attribute after it).

use proc_macro::{Delimiter, TokenStream, TokenTree};

/// Ignored where no test API server is configured (docs/testing.md).
#[proc_macro_attribute]
pub fn needs_test_cluster(attr: TokenStream, item: TokenStream) -> TokenStream {
    skip_unless(
        "needs_test_cluster",
        "gpuctl_no_test_cluster",
        "skipped: needs the test API server (docs/testing.md)",
        attr,
        item,
    )
}

/// Ignored where `prometheus` or `promtool` is not on `PATH` (Debian's `prometheus` package).
#[proc_macro_attribute]
pub fn needs_prometheus(attr: TokenStream, item: TokenStream) -> TokenStream {
    skip_unless(
        "needs_prometheus",
        "gpuctl_no_prometheus",
        "skipped: needs prometheus and promtool (docs/testing.md)",
        attr,
        item,
    )
}

/// Ignored where headless Chromium is not found (`CHROMIUM`, or `chromium` on `PATH`).
#[proc_macro_attribute]
pub fn needs_chromium(attr: TokenStream, item: TokenStream) -> TokenStream {
    skip_unless(
        "needs_chromium",
        "gpuctl_no_chromium",
        "skipped: needs chromium (Debian: apt-get install -y chromium; docs/status.md)",
        attr,
        item,
    )
}

/// Ignored where the real conftest is not found (`GPUCTL_CONFTEST`, or the harness's cache:
/// `tools/kube-harness/run build` builds it from the Go module proxy).
#[proc_macro_attribute]
pub fn needs_conftest(attr: TokenStream, item: TokenStream) -> TokenStream {
    skip_unless(
        "needs_conftest",
        "gpuctl_no_conftest",
        "skipped: needs conftest v0.71.1 (tools/kube-harness/run build; docs/policy.md)",
        attr,
        item,
    )
}

/// `#[cfg_attr(CFG, ignore = "REASON")]` in front of `item`, or a compile error saying where the
/// attribute goes.
fn skip_unless(
    name: &str,
    cfg: &str,
    reason: &str,
    attr: TokenStream,
    item: TokenStream,
) -> TokenStream {
    let problem = if !attr.is_empty() {
        Some(format!("#[{name}] takes no arguments"))
    } else if !has_test_attribute(&item) {
        Some(format!(
            "#[{name}] goes above #[test] or #[tokio::test] (the test harness reads `ignore` when \
             #[test] expands; below it, it comes too late)"
        ))
    } else {
        None
    };
    let code = match problem {
        Some(message) => format!("compile_error!({message:?});"),
        None => format!("#[cfg_attr({cfg}, ignore = {reason:?})]"),
    };
    let mut out: TokenStream = code.parse().expect("valid tokens");
    out.extend(item);
    out
}

/// Whether one of the item's outer attributes is a test attribute (`test`, `tokio::test`, ...,
/// with or without arguments).
fn has_test_attribute(item: &TokenStream) -> bool {
    let mut tokens = item.clone().into_iter().peekable();
    while let Some(TokenTree::Punct(p)) = tokens.peek() {
        if p.as_char() != '#' {
            break;
        }
        tokens.next();
        let Some(TokenTree::Group(g)) = tokens.next() else {
            return false;
        };
        if g.delimiter() != Delimiter::Bracket {
            return false;
        }
        // The path is every token before the arguments group: `test`, `tokio :: test`.
        let last = g
            .stream()
            .into_iter()
            .take_while(|t| !matches!(t, TokenTree::Group(_) | TokenTree::Literal(_)))
            .filter_map(|t| match t {
                TokenTree::Ident(i) => Some(i.to_string()),
                _ => None,
            })
            .last();
        if last.as_deref() == Some("test") {
            return true;
        }
    }
    false
}
