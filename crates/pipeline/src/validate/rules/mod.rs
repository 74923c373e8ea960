//! Rule families, one file each (the ids they emit are registered in the model crate's `finding/validation.rs`).

mod accounting;
mod compat;
mod composition;
mod dra;
mod dra_driver;
mod dra_extended;
mod dra_shapes;
mod dra_standalone;
mod install;
mod ip_pools;
mod kueue;
mod kueue_config;
mod mig;
mod monitoring;
mod network;
mod priority;
mod provisioning;
mod quota;
mod sharing;
mod structure;
mod volcano;

pub use ip_pools::ip_pool_nodes;
pub use network::wants_rdma;

use super::Ctx;
use gpuctl_model::profiles::KubernetesNameLimits;

pub(super) fn run_all(ctx: &mut Ctx<'_>) {
    structure::check(ctx);
    compat::check(ctx);
    mig::check(ctx);
    sharing::check(ctx);
    quota::check(ctx);
    priority::check(ctx);
    kueue::check(ctx);
    kueue_config::check(ctx);
    volcano::check(ctx);
    composition::check(ctx);
    monitoring::check(ctx);
    install::check(ctx);
    network::check(ctx);
    ip_pools::check(ctx);
    dra::check(ctx);
    dra_driver::check(ctx);
    dra_extended::check(ctx);
    dra_shapes::check(ctx);
    accounting::check(ctx);
    provisioning::check(ctx);
}

pub use gpuctl_model::names::is_dns_label;

/// DNS-1123 subdomain as the API server checks it (apimachinery `IsDNS1123Subdomain`):
/// dot-separated parts of the label alphabet, at most the catalog's length in all. The parts have no
/// length limit of their own there, so neither do they here (`<63-char tenant>-quota` is a valid
/// ResourceQuota name).
pub fn is_dns_subdomain(s: &str, n: &KubernetesNameLimits) -> bool {
    !s.is_empty()
        && s.len() <= n.dns1123_subdomain_max_length
        && s.split('.').all(|l| is_dns_label(l, usize::MAX))
}

/// Kubernetes label name part (and label value): alphanumerics, `-`, `_`, `.`, alphanumeric at
/// both ends, 1..=max chars.
fn is_label_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// A qualified label key `[prefix/]name`.
pub(crate) fn is_label_key(s: &str, n: &KubernetesNameLimits) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => {
            is_dns_subdomain(prefix, n) && is_label_name(name, n.label_name_max_length)
        }
        None => is_label_name(s, n.label_name_max_length),
    }
}

/// A label value: empty, or the characters of a label name within the value limit.
pub(crate) fn is_label_value(s: &str, n: &KubernetesNameLimits) -> bool {
    s.is_empty() || is_label_name(s, n.label_value_max_length)
}
