//! Which Helm releases are the GPU Operator's, the Network Operator's, Kueue's and Volcano's: found by the
//! chart they were installed from (the name in the release's `chart.metadata`), under any release
//! name and in any namespace. Several releases of one chart, or one under another name than the
//! one gpuctl manages, are named in warnings; nothing is picked silently.

use gpuctl_model::profiles::Catalog;
use gpuctl_plan::live::release::NamedRelease;

/// A chart import maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    /// NVIDIA GPU Operator.
    GpuOperator,
    /// NVIDIA Network Operator.
    NetworkOperator,
    /// Kueue.
    Kueue,
    /// Volcano.
    Volcano,
}

impl Chart {
    /// Every chart import looks for.
    pub const ALL: [Chart; 4] = [
        Chart::GpuOperator,
        Chart::NetworkOperator,
        Chart::Kueue,
        Chart::Volcano,
    ];

    /// The chart's name (`name` in its Chart.yaml), from the facts catalog and gpuctl's chart
    /// reference.
    pub fn chart_name(self, catalog: &Catalog) -> String {
        let last = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
        match self {
            Chart::GpuOperator => last(gpuctl_pipeline::render::CHART),
            Chart::NetworkOperator => catalog.network().network_operator.chart.clone(),
            Chart::Kueue => last(&catalog.queueing().kueue_configuration.chart_reference),
            Chart::Volcano => catalog.queueing().volcano_release.chart.clone(),
        }
    }

    /// The release name gpuctl gives the chart when it installs it.
    pub fn release_name(self) -> &'static str {
        match self {
            Chart::GpuOperator => gpuctl_pipeline::render::RELEASE_NAME,
            Chart::NetworkOperator => "network-operator",
            Chart::Kueue => "kueue",
            Chart::Volcano => "volcano",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Chart::GpuOperator => "GPU Operator",
            Chart::NetworkOperator => "Network Operator",
            Chart::Kueue => "Kueue",
            Chart::Volcano => "Volcano",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Chart::GpuOperator => "spec.gpuOperator",
            Chart::NetworkOperator => "spec.networkOperator",
            Chart::Kueue => "spec.scheduling.kueue",
            Chart::Volcano => "spec.scheduling.volcano",
        }
    }

    /// The chart `name` is, if import maps it.
    pub fn of(name: &str, catalog: &Catalog) -> Option<Chart> {
        Chart::ALL
            .into_iter()
            .find(|c| c.chart_name(catalog) == name)
    }
}

/// The release of each chart import maps, and what the choice leaves out.
#[derive(Debug, Default)]
pub struct Chosen<'a> {
    /// The GPU Operator's release.
    pub gpu_operator: Option<&'a NamedRelease>,
    /// The Network Operator's release.
    pub network_operator: Option<&'a NamedRelease>,
    /// Kueue's release.
    pub kueue: Option<&'a NamedRelease>,
    /// Volcano's release.
    pub volcano: Option<&'a NamedRelease>,
    /// `(blueprint path, message)` for every chart with more than one release.
    pub notes: Vec<(String, String)>,
}

impl<'a> Chosen<'a> {
    /// The release chosen for `chart`.
    pub fn of(&self, chart: Chart) -> Option<&'a NamedRelease> {
        match chart {
            Chart::GpuOperator => self.gpu_operator,
            Chart::NetworkOperator => self.network_operator,
            Chart::Kueue => self.kueue,
            Chart::Volcano => self.volcano,
        }
    }
}

/// A chart version as blueprints write it (`26.4.1` -> `v26.4.1`).
pub fn blueprint_version(chart_version: &str) -> String {
    if chart_version.starts_with('v') {
        chart_version.to_string()
    } else {
        format!("v{chart_version}")
    }
}

/// One release per chart: a `deployed` one before others, then the one named as gpuctl names it,
/// then the first by namespace and name. The others are named in a note.
pub fn choose<'a>(releases: &'a [NamedRelease], catalog: &Catalog) -> Chosen<'a> {
    let mut chosen = Chosen::default();
    for chart in Chart::ALL {
        let name = chart.chart_name(catalog);
        let mut of: Vec<&NamedRelease> = releases
            .iter()
            .filter(|r| r.release.chart == name)
            .collect();
        of.sort_by_key(|r| {
            (
                r.release.status != "deployed",
                r.name != chart.release_name(),
                r.namespace.clone(),
                r.name.clone(),
            )
        });
        let Some(first) = of.first().copied() else {
            continue;
        };
        if of.len() > 1 {
            let others: Vec<String> = of[1..]
                .iter()
                .map(|r| {
                    format!(
                        "{}/{} ({}, chart {})",
                        r.namespace, r.name, r.release.status, r.release.chart_version
                    )
                })
                .collect();
            chosen.notes.push((
                chart.path().to_string(),
                format!(
                    "the cluster has {} Helm releases of the {} chart `{name}`: {}/{} ({}, chart {}) was imported; {} {} left alone (gpuctl manages one)",
                    of.len(),
                    chart.title(),
                    first.namespace,
                    first.name,
                    first.release.status,
                    first.release.chart_version,
                    others.join(", "),
                    if others.len() == 1 { "is" } else { "are" }
                ),
            ));
        }
        match chart {
            Chart::GpuOperator => chosen.gpu_operator = Some(first),
            Chart::NetworkOperator => chosen.network_operator = Some(first),
            Chart::Kueue => chosen.kueue = Some(first),
            Chart::Volcano => chosen.volcano = Some(first),
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuctl_plan::live::release::LiveRelease;

    fn release(ns: &str, name: &str, chart: &str, status: &str) -> NamedRelease {
        NamedRelease {
            name: name.into(),
            namespace: ns.into(),
            release: LiveRelease {
                revision: 1,
                status: status.into(),
                chart: chart.into(),
                chart_version: "1.0.0".into(),
                values: serde_json::json!({}),
            },
        }
    }

    #[test]
    fn releases_are_found_by_chart_and_every_other_one_is_named() {
        let catalog = Catalog::embedded();
        let rs = vec![
            release("z", "old-gpu", "gpu-operator", "failed"),
            release("b", "gpu", "gpu-operator", "deployed"),
            release("a", "gpu-2", "gpu-operator", "deployed"),
            release("net", "nno", "network-operator", "deployed"),
            release("x", "cert-manager", "cert-manager", "deployed"),
        ];
        let c = choose(&rs, catalog);
        let g = c.gpu_operator.unwrap();
        // Deployed first, then by namespace.
        assert_eq!((g.namespace.as_str(), g.name.as_str()), ("a", "gpu-2"));
        assert_eq!(c.network_operator.unwrap().name, "nno");
        assert!(c.kueue.is_none());
        assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
        let (path, msg) = &c.notes[0];
        assert_eq!(path, "spec.gpuOperator");
        assert!(msg.contains("3 Helm releases"), "{msg}");
        assert!(msg.contains("b/gpu (deployed"), "{msg}");
        assert!(msg.contains("z/old-gpu (failed"), "{msg}");
    }

    #[test]
    fn the_release_gpuctl_would_name_wins_among_deployed_ones() {
        let rs = vec![
            release("a", "other", "kueue", "deployed"),
            release("kueue-system", "kueue", "kueue", "deployed"),
        ];
        let c = choose(&rs, Catalog::embedded());
        assert_eq!(c.kueue.unwrap().name, "kueue");
        assert_eq!(Chart::of("kueue", Catalog::embedded()), Some(Chart::Kueue));
        assert_eq!(
            Chart::of("gpu-operator", Catalog::embedded()),
            Some(Chart::GpuOperator)
        );
        assert_eq!(
            Chart::of("volcano", Catalog::embedded()),
            Some(Chart::Volcano)
        );
        assert_eq!(Chart::of("nginx", Catalog::embedded()), None);
        assert_eq!(blueprint_version("26.4.1"), "v26.4.1");
        assert_eq!(blueprint_version("v26.7.0"), "v26.7.0");
    }
}
