//! A running Kueue's configuration against the blueprint's (`scheduling.kueue.config`), when
//! someone else installs Kueue (`install: none`): a live plan reads Kueue's manager ConfigMap and
//! reports each setting that contradicts the blueprint, since gpuctl's rules assumed the
//! blueprint's settings.

use super::PlanFinding;
use gpuctl_model::blueprint::KueueConfig;
use gpuctl_model::profiles::Catalog;

/// What reading Kueue's manager ConfigMap found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KueueConfigReading {
    /// The Configuration text (the ConfigMap's key).
    Read(String),
    /// The ConfigMap, or its key, does not exist.
    Missing,
    /// It could not be read (permissions, connection).
    Failed(String),
}

/// Findings of a live plan about the running Kueue's configuration (`None`: not read); `mappings`
/// are the DRA device-class mappings the blueprint's shapes need
/// ([`gpuctl_pipeline::render::kueue_config::dra_mappings`]).
pub fn kueue_config_findings(
    config: &KueueConfig,
    mappings: &gpuctl_pipeline::render::kueue_config::ClassMappings,
    reading: Option<&KueueConfigReading>,
) -> Vec<PlanFinding> {
    let cm = &Catalog::embedded()
        .queueing()
        .kueue_configuration
        .config_map;
    let at = format!("ConfigMap {}/{} key {}", cm.namespace, cm.name, cm.key);
    match reading {
        None => vec![],
        Some(KueueConfigReading::Missing) => vec![PlanFinding::warning("GPU420", format!(
            "the blueprint says Kueue is installed by someone else (`scheduling.kueue.install: none`) but {at} does not exist: Kueue is not installed here, or not where its chart puts it; the queue rules assumed the blueprint's `config`"
        ))],
        Some(KueueConfigReading::Failed(e)) => vec![PlanFinding::warning("GPU421", format!(
            "could not read the running Kueue's configuration ({at}): {}; the queue rules assumed the blueprint's `config`",
            gpuctl_model::located::bounded(e.clone())
        ))],
        Some(KueueConfigReading::Read(text)) => {
            match gpuctl_pipeline::render::kueue_config::contradictions(config, mappings, text) {
                Err(e) => vec![PlanFinding::warning("GPU422", format!("the running Kueue's {at}: {e}"))],
                Ok(list) => list
                    .into_iter()
                    .map(|c| {
                        PlanFinding::warning("GPU423", format!(
                            "the running Kueue contradicts the blueprint ({at}): {c}; the queue rules checked the blueprint's setting, so fix whichever is wrong (`scheduling.kueue.config`, or Kueue's configuration)"
                        ))
                    })
                    .collect(),
            }
        }
    }
}
