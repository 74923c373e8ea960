//! Series in, figures out. Each point of a per-pod series stands for one step of GPU time:
//!
//! - **allocated**: weighted GPUs a running pod holds (a 1g slice of a 7-slice GPU is 1/7, a
//!   time-sliced replica 1/replicas), times the step;
//! - **used**: the weighted engine activity of the devices the pod holds, at most its allocation;
//! - **idle**: allocated minus used, where activity is known;
//! - **unknown**: allocated where no activity series exists (a scrape gap, a pool without
//!   dcgm-exporter): never counted as used or idle;
//! - **borrowed**: Kueue quota reserved above nominal, weighted like requests;
//! - **cost**: allocated times the pool's price.
//!
//! Steps without kube-state-metrics, and pools without dcgm-exporter data at a step, are counted
//! apart as hours the report cannot see ([`Report::blind`]).

use std::collections::BTreeMap;

use serde::Serialize;

use gpuctl_pipeline::render::accounting::AccountingTable;

use crate::{QueryKind, Series, Window};

/// What rows are per.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// Tenant (namespaces of no tenant: `(none)`).
    Tenant,
    /// Pool.
    Pool,
    /// GPU model.
    Model,
    /// Kueue ClusterQueue or Volcano queue of the tenant.
    Queue,
}

impl By {
    /// The column name.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Tenant => "tenant",
            By::Pool => "pool",
            By::Model => "model",
            By::Queue => "queue",
        }
    }
}

/// Key of pods in namespaces no tenant owns, or of a queue no tenant uses.
pub const NONE: &str = "(none)";

/// GPU-hours of one day and one key.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Figures {
    /// Allocated GPU-hours.
    pub allocated: f64,
    /// Used (engine-active) GPU-hours.
    pub used: f64,
    /// Idle GPU-hours (allocated, activity known, not used).
    pub idle: f64,
    /// Allocated GPU-hours whose activity is unknown.
    pub unknown: f64,
    /// Borrowed GPU-hours (Kueue quota above nominal).
    pub borrowed: f64,
    /// Lent GPU-hours (unused Kueue nominal quota the cohort borrowed; attributed, docs/report.md).
    pub lent: f64,
    /// Cost of the allocated hours (pools with a price only).
    pub cost: f64,
    /// Allocated GPU-hours on pools without a price.
    pub unpriced: f64,
}

impl Figures {
    fn add(&mut self, o: &Figures) {
        self.allocated += o.allocated;
        self.used += o.used;
        self.idle += o.idle;
        self.unknown += o.unknown;
        self.borrowed += o.borrowed;
        self.lent += o.lent;
        self.cost += o.cost;
        self.unpriced += o.unpriced;
    }
}

/// One row: a day (UTC, `YYYY-MM-DD`) and a key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Day, UTC.
    pub day: String,
    /// Tenant, pool, model or queue.
    pub key: String,
    /// The tenant's cost centre (`--by tenant`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_centre: Option<String>,
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
}

/// Hours the report could not see.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Blind {
    /// Hours of the window without kube-state-metrics data: allocation unknown for everyone.
    pub no_kube_state_metrics_hours: f64,
    /// Pool -> hours of the window without dcgm-exporter data for the pool.
    pub no_exporter_hours: BTreeMap<String, f64>,
    /// Pool -> hours of the window without any of its nodes in `kube_node_labels`: its pods
    /// cannot be joined to it, so its allocation is not counted.
    pub no_node_labels_hours: BTreeMap<String, f64>,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Blueprint name.
    pub blueprint: String,
    /// First point, unix seconds.
    pub start: i64,
    /// End, unix seconds (exclusive).
    pub end: i64,
    /// Step, seconds.
    pub step: i64,
    /// What rows are per.
    pub by: By,
    /// Currency of the costs.
    pub currency: String,
    /// Rows by day, then key.
    pub rows: Vec<Row>,
    /// Sum per key over the window.
    pub totals: Vec<Row>,
    /// What the report could not see.
    pub blind: Blind,
}

/// Folds range-query answers, chunk by chunk, into per-day figures: only the sums are kept, so
/// memory grows with days x keys, not with points.
#[derive(Debug)]
pub struct Accumulator<'t> {
    table: &'t AccountingTable,
    window: Window,
    by: By,
    cells: BTreeMap<(i64, String), Figures>,
    blind: Blind,
}

/// (namespace, pod, pool) of a per-pod series.
type PodKey = (String, String, String);

fn pod_key(s: &Series) -> PodKey {
    let l = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
    (l("namespace"), l("pod"), l("pool"))
}

impl<'t> Accumulator<'t> {
    /// An empty accumulator for `window`.
    pub fn new(table: &'t AccountingTable, window: Window, by: By) -> Accumulator<'t> {
        Accumulator {
            table,
            window,
            by,
            cells: BTreeMap::new(),
            blind: Blind::default(),
        }
    }

    fn hours(&self) -> f64 {
        self.window.step as f64 / 3600.0
    }

    /// Whether `t` is a point of the window (answers may carry points outside it).
    fn in_window(&self, t: i64) -> bool {
        t >= self.window.start
            && t < self.window.end
            && (t - self.window.start) % self.window.step == 0
    }

    fn key_of(&self, namespace: &str, pool: &str) -> String {
        let tenant = self.table.tenant_of(namespace);
        match self.by {
            By::Tenant => tenant.map_or(NONE.to_owned(), |t| t.name.clone()),
            By::Queue => tenant
                .and_then(|t| t.queue.clone())
                .unwrap_or_else(|| NONE.to_owned()),
            By::Pool => pool.to_owned(),
            By::Model => self
                .table
                .pool(pool)
                .map_or(NONE.to_owned(), |p| p.model.clone()),
        }
    }

    fn cell(&mut self, t: i64, key: String) -> &mut Figures {
        self.cells.entry((t.div_euclid(86_400), key)).or_default()
    }

    fn add_pods(&mut self, allocated: &[Series], active: &[Series]) {
        let activity: BTreeMap<PodKey, BTreeMap<i64, f64>> = active
            .iter()
            .map(|s| (pod_key(s), s.points.iter().copied().collect()))
            .collect();
        let h = self.hours();
        for s in allocated {
            let key = pod_key(s);
            let acts = activity.get(&key);
            let pool = self.table.pool(&key.2);
            let price = pool.and_then(|p| p.price);
            let k = self.key_of(&key.0, &key.2);
            for &(t, a) in &s.points {
                if !self.in_window(t) || !a.is_finite() || a <= 0.0 {
                    continue;
                }
                let used = acts
                    .and_then(|m| m.get(&t))
                    .copied()
                    .filter(|u| u.is_finite());
                let c = self.cell(t, k.clone());
                c.allocated += a * h;
                match used {
                    Some(u) => {
                        let u = u.clamp(0.0, a);
                        c.used += u * h;
                        c.idle += (a - u) * h;
                    }
                    None => c.unknown += a * h,
                }
                match price {
                    Some(p) => c.cost += a * h * p,
                    None => c.unpriced += a * h,
                }
            }
        }
    }

    /// Kueue queue series (borrowed or lent quota) into `field` of the queue's tenant (or queue,
    /// pool, model), weighted like requests.
    fn add_queue_quota(&mut self, list: &[Series], field: fn(&mut Figures) -> &mut f64) {
        let n = &self.table.names;
        let h = self.hours();
        for s in list {
            let l = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
            let (queue, flavor, resource) =
                (l(&n.queue_label), l(&n.flavor_label), l(&n.resource_label));
            let pool = self.table.pool(&flavor);
            let weight = pool
                .and_then(|p| p.quota_weights.get(&resource).copied())
                .unwrap_or(1.0);
            let tenants: Vec<&str> = self
                .table
                .tenants
                .iter()
                .filter(|t| t.queue.as_deref() == Some(queue.as_str()))
                .map(|t| t.name.as_str())
                .collect();
            let key = match self.by {
                By::Tenant if tenants.len() == 1 => tenants[0].to_owned(),
                By::Tenant | By::Queue => queue.clone(),
                By::Pool => flavor.clone(),
                By::Model => pool.map_or(NONE.to_owned(), |p| p.model.clone()),
            };
            for &(t, v) in &s.points {
                if self.in_window(t) && v.is_finite() && v > 0.0 {
                    *field(self.cell(t, key.clone())) += v * weight * h;
                }
            }
        }
    }

    /// Adds one chunk: its answers, and the points `[start, end]` it asked for (for coverage).
    pub fn add_chunk(&mut self, chunk: crate::Chunk, answers: &BTreeMap<QueryKind, Vec<Series>>) {
        let empty = Vec::new();
        let get = |k| answers.get(&k).unwrap_or(&empty);
        self.add_pods(get(QueryKind::Allocated), get(QueryKind::Active));
        self.add_queue_quota(get(QueryKind::Borrowed), |f| &mut f.borrowed);
        self.add_queue_quota(get(QueryKind::Lent), |f| &mut f.lent);
        let ksm = answers.get(&QueryKind::Coverage).unwrap_or(&empty);
        let present: std::collections::BTreeSet<i64> = ksm
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        let exporter = present_per_pool(answers.get(&QueryKind::PoolCoverage).unwrap_or(&empty));
        let nodes = present_per_pool(answers.get(&QueryKind::NodeCoverage).unwrap_or(&empty));
        let h = self.hours();
        let mut t = chunk.start;
        while t <= chunk.end {
            if self.in_window(t) {
                if !present.contains(&t) {
                    self.blind.no_kube_state_metrics_hours += h;
                }
                for p in &self.table.pools {
                    let seen = |m: &BTreeMap<&str, std::collections::BTreeSet<i64>>| {
                        m.get(p.name.as_str()).is_some_and(|s| s.contains(&t))
                    };
                    if !seen(&exporter) {
                        *self
                            .blind
                            .no_exporter_hours
                            .entry(p.name.clone())
                            .or_default() += h;
                    }
                    if !seen(&nodes) {
                        *self
                            .blind
                            .no_node_labels_hours
                            .entry(p.name.clone())
                            .or_default() += h;
                    }
                }
            }
            t += self.window.step;
        }
    }

    /// The report.
    pub fn finish(self) -> Report {
        let mut totals: BTreeMap<String, Figures> = BTreeMap::new();
        let mut rows = Vec::new();
        for ((day, key), f) in &self.cells {
            totals.entry(key.clone()).or_default().add(f);
            rows.push(self.row(day_string(*day), key.clone(), f.clone()));
        }
        let totals = totals
            .into_iter()
            .map(|(k, f)| self.row("total".to_owned(), k, f))
            .collect();
        Report {
            blueprint: self.table.blueprint.clone(),
            start: self.window.start,
            end: self.window.end,
            step: self.window.step,
            by: self.by,
            currency: self.table.currency.clone(),
            rows,
            totals,
            blind: self.blind,
        }
    }

    fn row(&self, day: String, key: String, figures: Figures) -> Row {
        let cost_centre = (self.by == By::Tenant)
            .then(|| self.table.tenants.iter().find(|t| t.name == key))
            .flatten()
            .and_then(|t| t.cost_centre.clone());
        Row {
            day,
            key,
            cost_centre,
            figures,
        }
    }
}

/// Pool -> the points at which a per-pool series is present.
fn present_per_pool(series: &[Series]) -> BTreeMap<&str, std::collections::BTreeSet<i64>> {
    let mut out: BTreeMap<&str, std::collections::BTreeSet<i64>> = BTreeMap::new();
    for s in series {
        let pool = s.labels.get("pool").map_or("", String::as_str);
        out.entry(pool)
            .or_default()
            .extend(s.points.iter().map(|p| p.0));
    }
    out
}

/// `YYYY-MM-DD` of a day number since 1970-01-01 (proleptic Gregorian, UTC).
pub fn day_string(day: i64) -> String {
    // Howard Hinnant's civil_from_days.
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests;
