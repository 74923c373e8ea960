//! Plain renderings of the catalog for `gpuctl profiles`: a human summary and the full tables as
//! JSON. Output is deterministic (the catalog's maps are sorted) and carries no colour.

use std::fmt::Write as _;

use serde::Serialize;

use gpuctl_model::profiles::{
    Architecture, Catalog, CudaRequirement, DriverBranch, FactRow, ForwardCompatibility, GpuModel,
    KernelModuleFlavors, Limits, OperatorFacts, OperatorRelease, Queueing,
};

/// The whole catalog as one JSON document (pretty-printed, ending with a newline).
pub fn json(catalog: &Catalog) -> String {
    #[derive(Serialize)]
    struct Source<'a> {
        file: &'a str,
        source: &'a str,
    }

    #[derive(Serialize)]
    struct Document<'a> {
        gpus: Vec<&'a GpuModel>,
        architectures: Vec<&'a Architecture>,
        cuda: Vec<&'a CudaRequirement>,
        forward_compatibility: &'a ForwardCompatibility,
        driver_branches: Vec<&'a DriverBranch>,
        kernel_module_flavors: &'a KernelModuleFlavors,
        operator_releases: Vec<&'a OperatorRelease>,
        operator: &'a OperatorFacts,
        limits: &'a Limits,
        queueing: &'a Queueing,
        network: &'a gpuctl_model::profiles::network::NetworkFacts,
        dcgm: &'a gpuctl_model::profiles::dcgm::DcgmFacts,
        sources: Vec<Source<'a>>,
        fact_rows: &'a [FactRow],
    }

    let sources = catalog.sources();
    let document = Document {
        gpus: catalog.gpus().collect(),
        architectures: catalog.architectures().collect(),
        cuda: catalog.cuda_entries().collect(),
        forward_compatibility: catalog.forward_compatibility(),
        driver_branches: catalog.driver_branches().collect(),
        kernel_module_flavors: catalog.kernel_module_flavors(),
        operator_releases: catalog.operator_releases().collect(),
        operator: catalog.operator_facts(),
        limits: catalog.limits(),
        queueing: catalog.queueing(),
        network: catalog.network(),
        dcgm: catalog.dcgm(),
        sources: sources
            .iter()
            .map(|(file, source)| Source { file, source })
            .collect(),
        fact_rows: catalog.fact_rows(),
    };
    // Every type in the document serialises to plain JSON values, so this cannot fail; an empty
    // object is still valid JSON should it ever do so.
    let mut text = serde_json::to_string_pretty(&document).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

/// A human summary: GPUs, CUDA minimum drivers, driver branches, operator releases, then the
/// sources every table cites.
pub fn human(catalog: &Catalog) -> String {
    let mut out = String::new();
    // One function a section; each ignores `write!`'s result, as writing to a String cannot fail.
    gpu_models(&mut out, catalog);
    architectures(&mut out, catalog);
    mig_profiles(&mut out, catalog);
    cuda_minimum_drivers(&mut out, catalog);
    driver_branches(&mut out, catalog);
    operator_releases(&mut out, catalog);
    operator_systems(&mut out, catalog);
    network_operator_releases(&mut out, catalog);
    queueing_releases(&mut out, catalog);
    sources(&mut out, catalog);
    out
}

/// The GPU models table.
fn gpu_models(out: &mut String, catalog: &Catalog) {
    let _ = writeln!(out, "GPU models ({})", catalog.gpus().count());
    let _ = writeln!(
        out,
        "  {:<24} {:<10} {:>5} {:>6}  {:<12} {:<11} MIG",
        "KEY", "ARCH", "CC", "MEMORY", "MIN DRIVER", "SEGMENT"
    );
    // A `*` marks a value resting on third-party or inferred evidence (the row's `weak` list).
    for gpu in catalog.gpus() {
        let weak = |field: &str| {
            if gpu.weak.iter().any(|w| w == field) {
                "*"
            } else {
                ""
            }
        };
        let min_driver = gpu
            .min_driver
            .as_ref()
            .map_or("-".to_owned(), |d| format!("{d}{}", weak("min_driver")));
        let memory = gpu
            .memory_gb
            .map_or("-".to_owned(), |m| format!("{m}GB{}", weak("memory_gb")));
        let cc = format!("{}{}", gpu.compute_capability, weak("compute_capability"));
        let mig = match &gpu.mig {
            Some(mig) => format!(
                "{} profiles, driver >= {}{} (names below)",
                mig.profiles.len(),
                mig.min_driver,
                weak("mig")
            ),
            None => "no".to_owned(),
        };
        let segment = match gpu.segment {
            gpuctl_model::profiles::Segment::Datacenter => "datacenter",
            gpuctl_model::profiles::Segment::Consumer => "consumer",
        };
        let _ = writeln!(
            out,
            "  {:<24} {:<10} {:>5} {:>6}  {:<12} {:<11} {}",
            gpu.key, gpu.architecture, cc, memory, min_driver, segment, mig
        );
    }
    let _ = writeln!(
        out,
        "  (* rests on third-party or inferred evidence; `-o json` gives each row's notes)"
    );
}

/// Each architecture with its GFD family and compute capabilities.
fn architectures(out: &mut String, catalog: &Catalog) {
    let _ = writeln!(out, "\nArchitectures (nvidia.com/gpu.family)");
    for arch in catalog.architectures() {
        let ccs: Vec<String> = arch
            .compute_capabilities
            .iter()
            .map(ToString::to_string)
            .collect();
        let mut ccs = ccs.join(", ");
        if let Some(r) = &arch.gfd_reserved {
            let _ = write!(ccs, " (GFD keeps `{}` for {}.x)", r.family, r.compute_major);
        }
        let status = match (arch.preview, arch.unpublished.len()) {
            (true, 0) => "  preview".to_owned(),
            (true, n) => format!("  preview; {n} facts not published (`-o json` lists them)"),
            (false, _) => String::new(),
        };
        let _ = writeln!(
            out,
            "  {:<10} {:<13} CC {ccs}{status}",
            arch.name, arch.gfd_family
        );
    }
}

/// The MIG profile names of each GPU that has them.
fn mig_profiles(out: &mut String, catalog: &Catalog) {
    let _ = writeln!(out, "\nMIG profiles (`partitioning.mig.layout` keys)");
    for gpu in catalog.gpus() {
        if let Some(mig) = &gpu.mig {
            let names: Vec<&str> = mig.profiles.iter().map(|p| p.name.as_str()).collect();
            let _ = writeln!(out, "  {:<24} {}", gpu.key, names.join(", "));
        }
    }
}

/// The minimum driver of each CUDA toolkit release.
fn cuda_minimum_drivers(out: &mut String, catalog: &Catalog) {
    let _ = writeln!(out, "\nCUDA toolkit -> minimum driver");
    for req in catalog.cuda_releases() {
        let mvc = req
            .minor_version_compat
            .as_ref()
            .map_or(String::new(), |m| format!("  (MVC from {})", m.min_driver));
        let _ = writeln!(
            out,
            "  {:<6} {}{}",
            req.cuda.to_string(),
            req.min_driver,
            mvc
        );
    }
}

/// Each driver branch and its end of life.
fn driver_branches(out: &mut String, catalog: &Catalog) {
    let _ = writeln!(out, "\nDriver branches");
    for branch in catalog.driver_branches() {
        let _ = writeln!(
            out,
            "  R{:<4} {:<17} end of life: {}",
            branch.branch,
            branch.branch_type.to_string(),
            branch.end_of_life
        );
    }
}

/// GPU Operator releases with their validated drivers, newest first, then the versions whose facts were not captured.
fn operator_releases(out: &mut String, catalog: &Catalog) {
    let _ = writeln!(
        out,
        "\nGPU Operator releases (validated drivers, newest first)"
    );
    for release in catalog.operator_releases() {
        let recommended = release
            .recommended_driver
            .as_ref()
            .map_or(String::new(), |r| format!(", recommended {r}"));
        let _ = writeln!(
            out,
            "  {:<9} Kubernetes {}-{}  default driver {}{recommended}",
            release.version.to_string(),
            release.kubernetes.min,
            release.kubernetes.max,
            release.default_driver
        );
        let drivers: Vec<String> = release.drivers().iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "            drivers: {}", drivers.join(", "));
        if !release.unconfirmed_drivers.is_empty() {
            let maybe: Vec<String> = release
                .unconfirmed_drivers
                .iter()
                .map(ToString::to_string)
                .collect();
            let _ = writeln!(
                out,
                "            unconfirmed (not counted as validated): {}",
                maybe.join(", ")
            );
        }
        let read = release.read.map_or("-".to_owned(), |d| d.to_string());
        let _ = writeln!(out, "            read {read}");
    }
    let facts = catalog.operator_facts();
    for missing in &facts.not_captured {
        let versions: Vec<String> = missing.versions.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            out,
            "  {}: not captured: {}",
            versions.join(", "),
            missing.notes.join(" ")
        );
    }
}

/// The operating systems (and kernels) each GPU Operator major supports.
fn operator_systems(out: &mut String, catalog: &Catalog) {
    let facts = catalog.operator_facts();
    let _ = writeln!(
        out,
        "\nGPU Operator operating systems (per major; kernels where listed)"
    );
    for os in &facts.os_support {
        let majors: Vec<String> = os
            .majors
            .iter()
            .map(|m| format!("{}.{}", m.major(), m.minor()))
            .collect();
        let systems: Vec<String> = os
            .systems
            .iter()
            .map(|s| {
                if s.kernels.is_empty() {
                    s.label()
                } else {
                    format!("{} [{}]", s.label(), s.kernels.join(" "))
                }
            })
            .collect();
        let _ = writeln!(out, "  {:<6} {}", majors.join(","), systems.join(", "));
    }
}

/// Network Operator releases with the DOCA-OFED driver each ships and its chart.
fn network_operator_releases(out: &mut String, catalog: &Catalog) {
    let network = &catalog.network().network_operator;
    let _ = writeln!(
        out,
        "\nNetwork Operator releases (DOCA-OFED driver shipped)"
    );
    for r in &network.releases {
        let kube = r
            .kubernetes
            .as_ref()
            .map_or("Kubernetes not found".to_owned(), |k| {
                format!("Kubernetes {}-{}", k.min, k.max)
            });
        let _ = writeln!(
            out,
            "  {:<9} {kube}  DOCA-OFED {}",
            r.version, r.doca_driver
        );
        if let Some(c) = &r.chart {
            let subcharts: Vec<String> = c
                .subcharts
                .iter()
                .map(|s| format!("{} {} (if {})", s.name, s.version, s.condition))
                .collect();
            let _ = writeln!(
                out,
                "            chart {}/{} {}, subcharts: {}",
                network.chart_repository.trim_end_matches('/'),
                network.chart,
                c.version,
                subcharts.join(", ")
            );
        }
    }
}

/// Kueue and Volcano release lines: what each serves and whether gpuctl renders for it.
fn queueing_releases(out: &mut String, catalog: &Catalog) {
    let queueing = catalog.queueing();
    for system in [&queueing.kueue, &queueing.volcano] {
        let _ = writeln!(
            out,
            "\n{} releases (gpuctl writes {})",
            system.name,
            system.api_version()
        );
        for line in &system.releases {
            let newest = line
                .newest_patch
                .as_deref()
                .map_or(String::new(), |p| format!(", up to {p}"));
            let released = line
                .released
                .map_or(String::new(), |d| format!(", from {d}"));
            let writes = if line.serves.contains(&system.renders) {
                "rendered"
            } else {
                "refused"
            };
            let _ = writeln!(
                out,
                "  {}.x{newest}{released}  serves {}  ({writes})",
                line.line,
                line.serves.join(", ")
            );
        }
        if system.name == queueing.kueue.name {
            let k = &queueing.kueue_configuration;
            for c in &k.charts {
                let _ = writeln!(
                    out,
                    "  {} chart {} {} (appVersion {})",
                    c.release, k.chart_reference, c.version, c.app_version
                );
            }
        }
    }
}

/// The source every table cites.
fn sources(out: &mut String, catalog: &Catalog) {
    let _ = writeln!(out, "\nSources");
    for (file, source) in catalog.sources() {
        let _ = writeln!(out, "  {file}: {source}");
    }
}

/// `gpuctl profiles --stale-after DAYS`, human: the rows read more than `days` days before `today`,
/// oldest first, then the tables that carry no dates at all.
pub fn stale_human(catalog: &Catalog, days: u32, today: jiff::civil::Date) -> String {
    let mut rows = catalog.stale_rows(today, days);
    rows.sort_by_key(|r| (r.read, r.file, r.row.clone()));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Fact rows read more than {days} days before {today}: {} of {}",
        rows.len(),
        catalog.fact_rows().len()
    );
    for r in &rows {
        let read = r.read.map_or("never".to_owned(), |d| d.to_string());
        let age = r
            .age_days(today)
            .map_or(String::new(), |a| format!(", {a} days"));
        let _ = writeln!(out, "  {}  {}  (read {read}{age})", r.file, r.row);
        for source in &r.sources {
            let _ = writeln!(out, "      source: {source}");
        }
    }
    let undated = catalog.undated_files();
    if !undated.is_empty() {
        let _ = writeln!(
            out,
            "Tables whose rows carry no read date yet (every fact in them is of unknown age): {}",
            undated.join(", ")
        );
    }
    out
}

/// `gpuctl profiles --stale-after DAYS -o json`.
pub fn stale_json(catalog: &Catalog, days: u32, today: jiff::civil::Date) -> String {
    #[derive(Serialize)]
    struct Row<'a> {
        #[serde(flatten)]
        row: &'a FactRow,
        age_days: Option<i64>,
    }
    #[derive(Serialize)]
    struct Document<'a> {
        today: String,
        stale_after_days: u32,
        rows_checked: usize,
        stale: Vec<Row<'a>>,
        undated_files: Vec<&'static str>,
    }
    let mut rows = catalog.stale_rows(today, days);
    rows.sort_by_key(|r| (r.read, r.file, r.row.clone()));
    let document = Document {
        today: today.to_string(),
        stale_after_days: days,
        rows_checked: catalog.fact_rows().len(),
        stale: rows
            .into_iter()
            .map(|row| Row {
                row,
                age_days: row.age_days(today),
            })
            .collect(),
        undated_files: catalog.undated_files(),
    };
    let mut text = serde_json::to_string_pretty(&document).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_complete_and_parses() {
        let text = json(Catalog::embedded());
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value["gpus"].as_array().map(Vec::len),
            Some(Catalog::embedded().gpus().count())
        );
        assert_eq!(
            value["limits"]["priority_class"]["max_user_value"],
            1_000_000_000
        );
        assert!(value["sources"].as_array().is_some_and(|s| !s.is_empty()));
        assert_eq!(text, json(Catalog::embedded()), "deterministic");
    }

    #[test]
    fn human_summary_lists_every_table() {
        let text = human(Catalog::embedded());
        for needle in [
            "H100-SXM5-80GB",
            "12.4   550.54.14",
            "R580",
            "v26.7.0",
            "Kueue releases (gpuctl writes kueue.x-k8s.io/v1beta2)",
            "v0.19.x, up to v0.19.3",
            "v0.19.2 chart oci://registry.k8s.io/kueue/charts/kueue 0.19.2 (appVersion v0.19.2)",
            "chart https://helm.ngc.nvidia.com/nvidia/network-operator 26.4.1, subcharts: node-feature-discovery 0.2.1 (if nfd.enabled)",
            "Volcano releases",
            "Sources",
        ] {
            assert!(text.contains(needle), "missing {needle}");
        }
    }

    /// What the hints send users to `gpuctl profiles` for is there: every validated driver of
    /// every operator release, and the name of every MIG profile.
    #[test]
    fn human_summary_shows_what_hints_promise() {
        let catalog = Catalog::embedded();
        let text = human(catalog);
        for release in catalog.operator_releases() {
            let start = text
                .find(&format!("  {:<9} Kubernetes", release.version.to_string()))
                .unwrap_or_else(|| panic!("{} missing", release.version));
            let line = text[start..].lines().nth(1).unwrap();
            for d in release.drivers() {
                assert!(
                    line.contains(&d.to_string()),
                    "{}: {d} missing",
                    release.version
                );
            }
        }
        for gpu in catalog.gpus() {
            if let Some(mig) = &gpu.mig {
                let section = &text[text.find("\nMIG profiles").unwrap()..];
                let line = section
                    .lines()
                    .find(|l| l.starts_with(&format!("  {:<24} ", gpu.key)))
                    .unwrap_or_else(|| panic!("no MIG line for {}", gpu.key));
                for p in &mig.profiles {
                    assert!(line.contains(&p.name), "{}: {} missing", gpu.key, p.name);
                }
            }
        }
    }
}
