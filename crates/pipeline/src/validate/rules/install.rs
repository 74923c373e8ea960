//! Where the charts (the GPU Operator's, Kueue's, the Network Operator's) and the operator's images
//! come from (GPU100, GPU101, GPU102): air-gapped clusters name a chart mirror, OCI registry or local
//! archive, and an image registry mirror.

use super::is_dns_subdomain;
use crate::validate::Ctx;
use gpuctl_model::blueprint::InstallMode;

const CHART: &str = "spec.gpuOperator.chart";
const IMAGES: &str = "spec.gpuOperator.images";

pub(super) fn check(ctx: &mut Ctx<'_>) {
    chart(ctx);
    images(ctx);
    consistency(ctx);
}

/// Every chart source the blueprint names: the GPU Operator's, Kueue's, Volcano's, the Network Operator's,
/// with their field paths and install modes.
fn charts(
    ctx: &Ctx<'_>,
) -> Vec<(
    &'static str,
    gpuctl_model::blueprint::ChartSourceSpec,
    InstallMode,
)> {
    let spec = &ctx.bp.spec;
    let op = &spec.gpu_operator;
    let mut out = vec![(CHART, op.chart.clone(), op.install)];
    if let Some(k) = &spec.scheduling.kueue {
        out.push(("spec.scheduling.kueue.chart", k.chart.clone(), k.install));
    }
    if let Some(v) = &spec.scheduling.volcano {
        out.push(("spec.scheduling.volcano.chart", v.chart.clone(), v.install));
    }
    if let Some(n) = &spec.network_operator {
        out.push(("spec.networkOperator.chart", n.chart.clone(), n.install));
    }
    out
}

fn chart(ctx: &mut Ctx<'_>) {
    for (field, c, _) in charts(ctx) {
        chart_source(ctx, field, &c);
    }
}

fn chart_source(ctx: &mut Ctx<'_>, field: &str, c: &gpuctl_model::blueprint::ChartSourceSpec) {
    let set = [c.repository.is_some(), c.oci.is_some(), c.path.is_some()];
    if set.iter().filter(|s| **s).count() > 1 {
        ctx.emit(
            "GPU100",
            field,
            "names more than one chart source",
            "keep one of `repository`, `oci` and `path`",
        );
    }
    if let Some(url) = &c.repository
        && let Err(e) = url_with_host(url, &["https://", "http://"])
    {
        ctx.emit(
            "GPU100",
            format!("{field}.repository"),
            format!("`{url}` is not a Helm repository URL: {e}"),
            "write e.g. `https://charts.internal.example.com/nvidia`",
        );
    }
    if let Some(r) = &c.oci
        && let Err(e) = url_with_host(r, &["oci://"])
    {
        ctx.emit(
            "GPU100",
            format!("{field}.oci"),
            format!("`{r}` is not an OCI chart reference: {e}"),
            "write e.g. `oci://registry.internal.example.com/charts/gpu-operator`",
        );
    }
    if let Some(p) = &c.path
        && let Err(e) = relative_path(p)
    {
        ctx.emit(
            "GPU100",
            format!("{field}.path"),
            format!("`{p}` cannot be a chart path: {e}"),
            "give the chart archive or directory relative to the blueprint file, inside its directory, e.g. `charts/gpu-operator-v26.7.0.tgz`",
        );
    }
}

fn images(ctx: &mut Ctx<'_>) {
    let Some(images) = ctx.bp.spec.gpu_operator.images.clone() else {
        return;
    };
    if let Err(e) = registry(&images.registry) {
        ctx.emit(
            "GPU101",
            format!("{IMAGES}.registry"),
            format!("`{}` is not an image registry: {e}", images.registry),
            "write `host[:port][/path]` without scheme, tag or digest, e.g. `registry.internal:5000/nvidia-mirror`",
        );
    }
    let names = ctx.catalog.limits().kubernetes_names.clone();
    let mut seen = std::collections::BTreeSet::new();
    for (i, s) in images.pull_secrets.iter().enumerate() {
        let path = format!("{IMAGES}.pullSecrets[{i}]");
        if !is_dns_subdomain(s, &names) {
            ctx.emit(
                "GPU101",
                path,
                format!("`{s}` is not a Secret name"),
                "use the name of a `kubernetes.io/dockerconfigjson` Secret in the operator's namespace (lower case, digits, `-` and `.`)",
            );
        } else if !seen.insert(s.clone()) {
            ctx.emit(
                "GPU101",
                path,
                format!("`{s}` is listed twice"),
                "list each Secret once",
            );
        }
    }
}

fn consistency(ctx: &mut Ctx<'_>) {
    for (field, c, mode) in charts(ctx) {
        if mode != InstallMode::Helm && c != Default::default() {
            ctx.emit(
                "GPU102",
                field,
                format!(
                    "`install: {mode}` means gpuctl never runs helm, so the chart source is not used"
                ),
                "drop `chart`, or set `install: helm`",
            );
        }
    }
    let op = &ctx.bp.spec.gpu_operator;
    let chart_set = op.chart != Default::default();
    if op.install == InstallMode::Helm && op.images.is_some() && !chart_set {
        ctx.emit(
            "GPU102",
            IMAGES,
            "images come from a mirror but the chart still comes from NVIDIA's public Helm repository",
            "set `gpuOperator.chart.path` (an archive next to the blueprint), `chart.oci` or `chart.repository` to where the chart is mirrored",
        );
    }
}

/// `scheme://host[:port][/path]` with one of `schemes`.
fn url_with_host(url: &str, schemes: &[&str]) -> Result<(), String> {
    let Some(rest) = schemes.iter().find_map(|s| url.strip_prefix(s)) else {
        return Err(format!("it must start with {}", schemes.join(" or ")));
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it contains whitespace".into());
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err("it names no host (credentials do not belong in a blueprint)".into());
    }
    Ok(())
}

/// A relative path inside the blueprint's directory.
fn relative_path(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("it is empty".into());
    }
    if p.starts_with('/') || p.starts_with('~') || p.contains('\\') {
        return Err("it must be relative to the blueprint file".into());
    }
    if p.split('/').any(|part| part == "..") {
        return Err("it leaves the blueprint's directory (`..`)".into());
    }
    if p.chars().any(char::is_control) {
        return Err("it contains control characters".into());
    }
    Ok(())
}

/// `host[:port][/path]`: no scheme, tag, digest or whitespace; a plausible host.
fn registry(r: &str) -> Result<(), String> {
    if r.contains("://") {
        return Err("leave out the scheme".into());
    }
    if r.contains('@') {
        return Err("a registry has no digest or credentials".into());
    }
    if r.is_empty() || r.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it is empty or contains whitespace".into());
    }
    let (host, path) = r.split_once('/').unwrap_or((r, ""));
    let (name, port) = host.split_once(':').unwrap_or((host, ""));
    if !port.is_empty() && port.parse::<u16>().is_err() {
        return Err(format!("`{port}` is not a port"));
    }
    let ok_host = !name.is_empty()
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !ok_host {
        return Err(format!("`{name}` is not a host name"));
    }
    if !path.is_empty() && !path.split('/').all(repository_part) {
        return Err(format!(
            "`{path}` is not a repository path (lower-case parts separated by `/`, no tag)"
        ));
    }
    Ok(())
}

/// One `/`-separated part of an OCI repository name: lower-case alphanumerics joined by `.`, `_`
/// or `-` (the distribution spec's path component).
fn repository_part(part: &str) -> bool {
    let b = part.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}
