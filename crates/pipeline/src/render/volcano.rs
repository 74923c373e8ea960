//! Volcano's own Helm release (`scheduling.volcano.install: helm` or `gitops`): Volcano's chart as
//! it publishes it (`profiles/queueing.yaml`, `volcano_release`), the chart version of the declared
//! Volcano release, and the blueprint's `values` as the release's values.

use gpuctl_model::blueprint::Volcano;
use gpuctl_model::profiles::VolcanoRelease;

/// Path of the Volcano chart values in [`crate::render::RenderedSet::documents`].
pub const VOLCANO_VALUES: &str = "helm/volcano-values.yaml";

/// Volcano's Helm release: release, chart and namespace as Volcano's installation guide names them
/// (`volcano`, `volcano-system`), the chart version of the declared release (a release gpuctl has
/// no chart for, which validation refuses, falls back to the tag without its `v`), the blueprint's
/// values, and the chart source it names (default: Volcano's Helm repository).
pub fn release(volcano: &Volcano, facts: &VolcanoRelease) -> super::HelmRelease {
    super::HelmRelease {
        stack: super::Stack::Volcano,
        release: facts.release.clone(),
        chart: facts.chart.clone(),
        version: facts.chart_of(&volcano.version).map_or_else(
            || volcano.version.trim().trim_start_matches('v').to_string(),
            |c| c.version.clone(),
        ),
        namespace: facts.namespace.clone(),
        install: volcano.install,
        values: serde_json::Value::Object(volcano.values.clone()),
        source: super::ChartSource::from_spec(
            &volcano.chart,
            super::ChartSource::Repository {
                url: facts.chart_repository.clone(),
            },
        ),
    }
}

/// The values document: a header with the `helm upgrade --install` command, then the values.
pub fn values_document(r: &super::HelmRelease, blueprint: &str) -> String {
    format!(
        "# Volcano chart {} values rendered by gpuctl from blueprint `{blueprint}` (install: {}).\n# helm upgrade --install {} {} --version {} --namespace {} --create-namespace -f volcano-values.yaml\n{}",
        r.version,
        r.install,
        r.release,
        r.chart_reference(),
        r.version,
        r.namespace,
        super::text::yaml(&r.values)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{ChartSource, Stack};
    use gpuctl_model::blueprint::{ChartSourceSpec, InstallMode};
    use gpuctl_model::profiles::Catalog;

    fn volcano(version: &str, chart: ChartSourceSpec, values: serde_json::Value) -> Volcano {
        Volcano {
            version: version.into(),
            install: InstallMode::Helm,
            chart,
            values: values.as_object().cloned().unwrap(),
            queues: vec![],
        }
    }

    /// Release, chart, version, namespace and source per blueprint: Volcano's repository by
    /// default, the chart version of the declared release, the values as given.
    #[test]
    fn release_per_blueprint() {
        let facts = &Catalog::embedded().queueing().volcano_release;
        let values = serde_json::json!({"custom": {"scheduler_replicas": 2}});
        for (version, chart, want_version, want_ref) in [
            (
                "v1.15.1",
                ChartSourceSpec::default(),
                "1.15.1",
                "volcano --repo https://volcano-sh.github.io/helm-charts",
            ),
            (
                "1.15.1",
                ChartSourceSpec {
                    path: Some("charts/volcano-1.15.1.tgz".into()),
                    ..Default::default()
                },
                "1.15.1",
                "charts/volcano-1.15.1.tgz",
            ),
            (
                "v1.14.4",
                ChartSourceSpec {
                    oci: Some("oci://registry.internal.example/charts/volcano".into()),
                    ..Default::default()
                },
                "1.14.4",
                "oci://registry.internal.example/charts/volcano",
            ),
        ] {
            let r = release(&volcano(version, chart, values.clone()), facts);
            assert_eq!(r.stack, Stack::Volcano);
            assert_eq!(
                (r.release.as_str(), r.chart.as_str()),
                ("volcano", "volcano")
            );
            assert_eq!(r.namespace, "volcano-system");
            assert_eq!(r.version, want_version, "{version}");
            assert_eq!(r.chart_reference(), want_ref, "{version}");
            assert_eq!(r.values, values);
        }
        let r = release(
            &volcano("v1.15.1", ChartSourceSpec::default(), serde_json::json!({})),
            facts,
        );
        assert_eq!(
            r.source,
            ChartSource::Repository {
                url: "https://volcano-sh.github.io/helm-charts".into()
            }
        );
        let doc = values_document(&r, "bp");
        assert!(
            doc.contains("# helm upgrade --install volcano volcano --repo https://volcano-sh.github.io/helm-charts --version 1.15.1 --namespace volcano-system --create-namespace -f volcano-values.yaml\n"),
            "{doc}"
        );
    }
}
