//! Rule families, one file each (see `registry.rs` for the ids they emit).

mod compat;
mod kueue;
mod mig;
mod monitoring;
mod priority;
mod quota;
mod sharing;
mod structure;
mod volcano;

use super::Ctx;

pub(super) fn run_all(ctx: &mut Ctx<'_>) {
    structure::check(ctx);
    compat::check(ctx);
    mig::check(ctx);
    sharing::check(ctx);
    quota::check(ctx);
    priority::check(ctx);
    kueue::check(ctx);
    volcano::check(ctx);
    monitoring::check(ctx);
}

/// DNS-1123 label: lower-case alphanumerics and `-`, alphanumeric at both ends, 1..=max chars.
pub(crate) fn is_dns_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// DNS-1123 subdomain: dot-separated labels, at most `max` chars.
pub(crate) fn is_dns_subdomain(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.split('.').all(|l| is_dns_label(l, 63))
}

/// Kubernetes label name part: alphanumerics, `-`, `_`, `.`, alphanumeric at both ends, <= 63.
pub(crate) fn is_label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// A qualified label key `[prefix/]name`.
pub(crate) fn is_label_key(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix, 253) && is_label_name(name),
        None => is_label_name(s),
    }
}

/// A label value: empty, or a label name.
pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_label_name(s)
}
