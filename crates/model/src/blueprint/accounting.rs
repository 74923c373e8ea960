//! GPU-hours accounting (`spec.accounting`): prices per GPU-hour, how a MIG slice or a shared
//! replica is weighted, when an allocated GPU counts as idle, and the tenants' cost centres. Read by
//! the recording rules render writes and by `gpuctl report` (docs/report.md).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What `gpuctl report` and the accounting recording rules need beyond the rest of the blueprint.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Accounting {
    /// ISO 4217 code of the prices (three capital letters).
    #[serde(default = "default_currency")]
    #[schemars(example = &"EUR")]
    pub currency: String,
    /// Price of one GPU-hour, per pool or per GPU model (a pool's own price wins over its
    /// model's). A pool without a price is reported without cost.
    #[serde(default)]
    #[schemars(example = prices_example())]
    pub prices: Vec<Price>,
    /// How a MIG instance counts as a share of its GPU: `compute` (compute slices / the GPU's,
    /// the default: a 1g slice of a 7-slice GPU is 1/7), `memory` (memory slices / the GPU's) or
    /// `table` (the `weights` table). A time-sliced or MPS replica always counts as 1/replicas.
    #[serde(default)]
    #[schemars(example = &"memory")]
    pub weighting: Weighting,
    /// With `weighting: table`: MIG profile (`1g.10gb`) -> share of a GPU, in (0, 1].
    #[serde(default)]
    #[schemars(example = weights_example())]
    pub weights: BTreeMap<String, f64>,
    /// When an allocated GPU counts as idle.
    #[serde(default)]
    #[schemars(example = idle_example())]
    pub idle: IdleThreshold,
    /// Tenant name -> cost centre, printed beside the tenant in reports.
    #[serde(default)]
    #[schemars(example = cost_centres_example())]
    pub cost_centres: BTreeMap<String, String>,
}

/// How a MIG instance is weighted against a whole GPU.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Weighting {
    /// Compute slices of the instance / compute slices of the GPU.
    #[default]
    Compute,
    /// Memory slices of the instance / memory slices of the GPU.
    Memory,
    /// The `weights` table.
    Table,
}

/// The price of a GPU-hour on one pool or one GPU model.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    /// A pool of `nodePools` (this or `model`).
    #[serde(default)]
    #[schemars(example = &"h100-train")]
    pub pool: Option<String>,
    /// A GPU model key of a pool (`H100-SXM5-80GB`).
    #[serde(default)]
    #[schemars(example = &"A100-SXM4-80GB")]
    pub model: Option<String>,
    /// Price of one whole GPU for one hour, in `currency`; 0 or more.
    #[schemars(example = &2.5)]
    pub per_gpu_hour: f64,
}

/// Engine activity below `activityBelowPercent` for `for` makes an allocated GPU idle (alerts); in
/// reports, an allocated step whose activity is below the percentage counts as idle.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdleThreshold {
    /// Graphics/compute engine activity, in percent of time, in (0, 100].
    #[serde(default = "default_below")]
    #[schemars(example = &5.0)]
    pub activity_below_percent: f64,
    /// How long the activity must stay below before the idle alert fires, e.g. `30m` (1m to
    /// 168h); also `gpuctl doctor --prometheus`'s default `--idle-window`.
    #[serde(default = "default_for", rename = "for")]
    #[schemars(example = &"30m")]
    pub for_: String,
}

impl Default for IdleThreshold {
    fn default() -> Self {
        IdleThreshold {
            activity_below_percent: default_below(),
            for_: default_for(),
        }
    }
}

fn default_currency() -> String {
    "USD".to_owned()
}

fn default_below() -> f64 {
    5.0
}

fn default_for() -> String {
    "30m".to_owned()
}

fn prices_example() -> serde_json::Value {
    serde_json::json!([{ "pool": "h100-train", "perGpuHour": 2.5 }, { "model": "A100-SXM4-80GB", "perGpuHour": 1.2 }])
}

fn weights_example() -> serde_json::Value {
    serde_json::json!({ "1g.10gb": 0.125, "3g.40gb": 0.5 })
}

fn cost_centres_example() -> serde_json::Value {
    serde_json::json!({ "team-a": "CC-4711" })
}

fn idle_example() -> serde_json::Value {
    serde_json::json!({ "activityBelowPercent": 10, "for": "1h" })
}
