//! Kueue ClusterQueues and Volcano Queues for `gpuctl status`: quota from their spec, use from the
//! status their controllers write, and the lent amounts Kueue does not report (module docs of
//! [`super`] define them).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::input::quantity_map;
use super::ratio;
use gpuctl_model::blueprint::model::Blueprint;
use gpuctl_model::quantity::parse_milli;

/// One resource of one flavor of a ClusterQueue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUse {
    /// ResourceFlavor (gpuctl names it after the pool).
    pub flavor: String,
    /// Resource name.
    pub resource: String,
    /// `nominalQuota` (`0` when the flavor has no quota for it).
    pub nominal: String,
    /// `borrowingLimit`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<String>,
    /// `lendingLimit`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<String>,
    /// `status.flavorsReservation[].resources[].total`.
    pub used: String,
    /// `status.flavorsReservation[].resources[].borrowed`.
    pub borrowed: String,
    /// gpuctl's attribution of the cohort's borrowing to this queue's unused quota.
    pub lent: String,
    /// used / nominal.
    pub ratio: Option<f64>,
}

/// One Kueue ClusterQueue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Name.
    pub name: String,
    /// `spec.cohortName`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    /// The blueprint declares it.
    pub in_blueprint: bool,
    /// The cluster has it.
    pub live: bool,
    /// `status.admittedWorkloads`.
    pub admitted: u64,
    /// `status.reservingWorkloads`.
    pub reserving: u64,
    /// `status.pendingWorkloads`.
    pub pending: u64,
    /// The `Active` condition is True.
    pub active: bool,
    /// Per flavor and resource, sorted.
    pub flavors: Vec<FlavorUse>,
}

/// One resource of a Volcano Queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoResource {
    /// Resource name.
    pub resource: String,
    /// `status.allocated` (`0` when absent).
    pub allocated: String,
    /// `spec.deserved`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deserved: Option<String>,
    /// `spec.capability`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// `spec.guarantee.resource`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<String>,
    /// allocated / (deserved, else capability).
    pub ratio: Option<f64>,
}

/// One Volcano Queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoQueueStatus {
    /// Name.
    pub name: String,
    /// `spec.parent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The blueprint declares it.
    pub in_blueprint: bool,
    /// The cluster has it.
    pub live: bool,
    /// `status.state` (`Open`, `Closed`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// PodGroups by phase (`status.pending`, `inqueue`, `running`).
    pub pending: u64,
    /// `status.inqueue`.
    pub inqueue: u64,
    /// `status.running`.
    pub running: u64,
    /// Per resource named in spec or status, sorted.
    pub resources: Vec<VolcanoResource>,
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn qtext(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn milli(text: &str) -> i128 {
    parse_milli(text).unwrap_or(0).max(0)
}

/// Milli-units as a quantity: whole numbers plainly (with a binary suffix when exact and at least
/// 1Ki, as memory is written), fractions as `NNNm`.
pub fn format_milli(m: i128) -> String {
    if m % 1000 != 0 {
        return format!("{m}m");
    }
    let n = m / 1000;
    for (suffix, shift) in [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ] {
        let unit = 1i128 << shift;
        if n != 0 && n % unit == 0 && n.abs() >= unit {
            return format!("{}{suffix}", n / unit);
        }
    }
    n.to_string()
}

#[derive(Default, Clone)]
struct Quota {
    nominal: Option<String>,
    borrowing: Option<String>,
    lending: Option<String>,
    used: Option<String>,
    borrowed: Option<String>,
}

/// Shares `total` among `weights` in proportion, in whole units (milli-units of whole units), the
/// remainder to the largest fractional shares, ties by position. Never more than a weight.
fn share(total: i128, weights: &[i128]) -> Vec<i128> {
    let sum: i128 = weights.iter().sum();
    if sum <= 0 || total <= 0 {
        return vec![0; weights.len()];
    }
    let total = total.min(sum);
    // Work in whole units when everything is whole (GPUs), else in milli-units.
    let whole = total % 1000 == 0 && weights.iter().all(|w| w % 1000 == 0);
    let unit = if whole { 1000 } else { 1 };
    let (t, ws): (i128, Vec<i128>) = (total / unit, weights.iter().map(|w| w / unit).collect());
    let s: i128 = ws.iter().sum();
    let mut out: Vec<i128> = ws.iter().map(|w| t * w / s).collect();
    let mut left = t - out.iter().sum::<i128>();
    let mut order: Vec<usize> = (0..ws.len()).collect();
    order.sort_by(|a, b| {
        let ra = (t * ws[*a]) % s;
        let rb = (t * ws[*b]) % s;
        rb.cmp(&ra).then(a.cmp(b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        if out[i] < ws[i] {
            out[i] += 1;
            left -= 1;
        }
    }
    out.into_iter().map(|x| x * unit).collect()
}

/// The ClusterQueues of the cluster and of the blueprint.
pub(crate) fn cluster_queues(bp: &Blueprint, live: &[Value]) -> Vec<ClusterQueueStatus> {
    let declared: BTreeMap<&str, &gpuctl_model::blueprint::model::ClusterQueue> = bp
        .spec
        .scheduling
        .kueue
        .iter()
        .flat_map(|k| k.cluster_queues.iter().map(|q| (q.name.as_str(), q)))
        .collect();
    let by_name: BTreeMap<&str, &Value> = live
        .iter()
        .filter_map(|q| q["metadata"]["name"].as_str().map(|n| (n, q)))
        .collect();
    let names: BTreeSet<&str> = declared.keys().chain(by_name.keys()).copied().collect();

    // Per queue, (flavor, resource) -> quota and use.
    let mut rows: BTreeMap<&str, Table> = BTreeMap::new();
    let mut out: Vec<ClusterQueueStatus> = Vec::new();
    for name in &names {
        let q = by_name.get(name).copied();
        let table: Table;
        let cohort;
        if let Some(q) = q {
            cohort = q["spec"]["cohortName"].as_str().map(str::to_string);
            table = live_table(q);
        } else {
            // Declared but absent: the blueprint's quota, nothing used.
            let d = declared[name];
            cohort = d.cohort.clone();
            table = declared_table(d);
        }
        let status = q.map(|q| &q["status"]);
        let active = status.is_some_and(|s| {
            s["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Active" && c["status"] == "True")
            })
        });
        out.push(ClusterQueueStatus {
            name: name.to_string(),
            cohort,
            in_blueprint: declared.contains_key(name),
            live: q.is_some(),
            admitted: status.map_or(0, |s| count(&s["admittedWorkloads"])),
            reserving: status.map_or(0, |s| count(&s["reservingWorkloads"])),
            pending: status.map_or(0, |s| count(&s["pendingWorkloads"])),
            active,
            flavors: Vec::new(),
        });
        rows.insert(name, table);
    }

    // Lent: per cohort and (flavor, resource), the cohort's borrowed total shared by lendable quota.
    let lent = lent_in_cohorts(&out, &rows);
    for q in &mut out {
        let table = &rows[q.name.as_str()];
        q.flavors = flavor_uses(&q.name, table, &lent);
    }
    out
}

/// A queue's quota and use per `(flavor, resource)`.
type Table = BTreeMap<(String, String), Quota>;

/// The row of `flavor` and the resource `r` names (its `name`).
fn cell<'a>(table: &'a mut Table, flavor: &str, r: &Value) -> &'a mut Quota {
    let res = r["name"].as_str().unwrap_or_default();
    table
        .entry((flavor.to_string(), res.to_string()))
        .or_default()
}

/// A live ClusterQueue's quotas (spec) and reservations (status).
fn live_table(q: &Value) -> Table {
    let mut table = Table::new();
    for g in q["spec"]["resourceGroups"].as_array().into_iter().flatten() {
        for f in g["flavors"].as_array().into_iter().flatten() {
            let flavor = f["name"].as_str().unwrap_or_default();
            for r in f["resources"].as_array().into_iter().flatten() {
                let e = cell(&mut table, flavor, r);
                e.nominal = qtext(&r["nominalQuota"]);
                e.borrowing = qtext(&r["borrowingLimit"]);
                e.lending = qtext(&r["lendingLimit"]);
            }
        }
    }
    for f in q["status"]["flavorsReservation"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let flavor = f["name"].as_str().unwrap_or_default();
        for r in f["resources"].as_array().into_iter().flatten() {
            let e = cell(&mut table, flavor, r);
            e.used = qtext(&r["total"]);
            e.borrowed = qtext(&r["borrowed"]);
        }
    }
    table
}

/// A declared ClusterQueue absent from the cluster: the blueprint's quota, nothing used.
fn declared_table(d: &gpuctl_model::blueprint::model::ClusterQueue) -> Table {
    let mut table = Table::new();
    for fq in &d.resources {
        for (res, n) in &fq.quota {
            let e = table.entry((fq.pool.clone(), res.clone())).or_default();
            e.nominal = Some(n.0.clone());
            e.borrowing = fq.borrowing_limit.get(res).map(|q| q.0.clone());
            e.lending = fq.lending_limit.get(res).map(|q| q.0.clone());
        }
    }
    table
}

/// Lent: per cohort and (flavor, resource), the cohort's borrowed total shared by lendable quota.
fn lent_in_cohorts(
    out: &[ClusterQueueStatus],
    rows: &BTreeMap<&str, Table>,
) -> BTreeMap<(String, (String, String)), i128> {
    let mut lent: BTreeMap<(String, (String, String)), i128> = BTreeMap::new();
    let mut cohorts: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for q in out {
        if let Some(c) = &q.cohort
            && let Some((name, _)) = rows.get_key_value(q.name.as_str())
        {
            cohorts.entry(c.clone()).or_default().push(name);
        }
    }
    for members in cohorts.values() {
        let keys: BTreeSet<&(String, String)> =
            members.iter().flat_map(|m| rows[m].keys()).collect();
        for key in keys {
            let borrowed: i128 = members
                .iter()
                .filter_map(|m| rows[m].get(key))
                .map(|q| q.borrowed.as_deref().map_or(0, milli))
                .sum();
            let lendable: Vec<i128> = members
                .iter()
                .map(|m| {
                    rows[m].get(key).map_or(0, |q| {
                        let nominal = q.nominal.as_deref().map_or(0, milli);
                        let used = q.used.as_deref().map_or(0, milli);
                        let unused = (nominal - used).max(0);
                        match q.lending.as_deref() {
                            Some(l) => unused.min(milli(l)),
                            None => unused,
                        }
                    })
                })
                .collect();
            for (m, l) in members.iter().zip(share(borrowed, &lendable)) {
                lent.insert((m.to_string(), key.clone()), l);
            }
        }
    }
    lent
}

/// A queue's rows: quota, limits, use, borrowed and lent per (flavor, resource).
fn flavor_uses(
    name: &str,
    table: &Table,
    lent: &BTreeMap<(String, (String, String)), i128>,
) -> Vec<FlavorUse> {
    table
        .iter()
        .map(|((flavor, resource), u)| {
            let nominal = u.nominal.clone().unwrap_or_else(|| "0".into());
            let used = u.used.clone().unwrap_or_else(|| "0".into());
            FlavorUse {
                flavor: flavor.clone(),
                resource: resource.clone(),
                ratio: ratio(&used, &nominal),
                nominal,
                borrowing_limit: u.borrowing.clone(),
                lending_limit: u.lending.clone(),
                used,
                borrowed: u.borrowed.clone().unwrap_or_else(|| "0".into()),
                lent: format_milli(
                    lent.get(&(name.to_string(), (flavor.clone(), resource.clone())))
                        .copied()
                        .unwrap_or(0),
                ),
            }
        })
        .collect()
}

/// The Volcano Queues of the cluster and of the blueprint.
pub(crate) fn volcano_queues(bp: &Blueprint, live: &[Value]) -> Vec<VolcanoQueueStatus> {
    let declared: BTreeMap<&str, &gpuctl_model::blueprint::model::VolcanoQueue> = bp
        .spec
        .scheduling
        .volcano
        .iter()
        .flat_map(|v| v.queues.iter().map(|q| (q.name.as_str(), q)))
        .collect();
    let by_name: BTreeMap<&str, &Value> = live
        .iter()
        .filter_map(|q| q["metadata"]["name"].as_str().map(|n| (n, q)))
        .collect();
    let names: BTreeSet<&str> = declared.keys().chain(by_name.keys()).copied().collect();
    names
        .into_iter()
        .map(|name| {
            let q = by_name.get(name).copied();
            let (deserved, capability, guarantee, allocated, parent) = match q {
                Some(q) => (
                    quantity_map(&q["spec"]["deserved"]),
                    quantity_map(&q["spec"]["capability"]),
                    quantity_map(&q["spec"]["guarantee"]["resource"]),
                    quantity_map(&q["status"]["allocated"]),
                    q["spec"]["parent"].as_str().map(str::to_string),
                ),
                None => {
                    let d = declared[name];
                    let m = |x: &BTreeMap<String, gpuctl_model::blueprint::model::Quantity>| {
                        x.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect()
                    };
                    (
                        m(&d.deserved),
                        m(&d.capability),
                        m(&d.guarantee),
                        BTreeMap::new(),
                        d.parent.clone(),
                    )
                }
            };
            let keys: BTreeSet<&String> = deserved
                .keys()
                .chain(capability.keys())
                .chain(guarantee.keys())
                .chain(allocated.keys())
                .collect();
            let resources = keys
                .into_iter()
                .map(|r| {
                    let alloc = allocated.get(r).cloned().unwrap_or_else(|| "0".into());
                    let base = deserved.get(r).or(capability.get(r));
                    VolcanoResource {
                        resource: r.clone(),
                        ratio: base.and_then(|b| ratio(&alloc, b)),
                        allocated: alloc,
                        deserved: deserved.get(r).cloned(),
                        capability: capability.get(r).cloned(),
                        guarantee: guarantee.get(r).cloned(),
                    }
                })
                .collect();
            let status = q.map(|q| &q["status"]);
            VolcanoQueueStatus {
                name: name.to_string(),
                parent,
                in_blueprint: declared.contains_key(name),
                live: q.is_some(),
                state: status.and_then(|s| s["state"].as_str().map(str::to_string)),
                pending: status.map_or(0, |s| count(&s["pending"])),
                inqueue: status.map_or(0, |s| count(&s["inqueue"])),
                running: status.map_or(0, |s| count(&s["running"])),
                resources,
            }
        })
        .collect()
}

#[cfg(test)]
mod share_tests {
    use super::*;

    #[test]
    fn borrowing_is_shared_by_lendable_quota_in_whole_units() {
        // 10 GPUs borrowed; lenders with 30 and 10 unused: 7.5 and 2.5 -> 8 and 2 (ties to the first).
        assert_eq!(share(10_000, &[30_000, 10_000]), vec![8_000, 2_000]);
        // Never more than a lender can lend, never more than borrowed.
        assert_eq!(share(50_000, &[3_000, 0, 4_000]), vec![3_000, 0, 4_000]);
        assert_eq!(share(0, &[3_000]), vec![0]);
        assert_eq!(share(5_000, &[0, 0]), vec![0, 0]);
        // Fractions (cpu) in milli-units.
        assert_eq!(share(1_500, &[1_000, 1_000]), vec![750, 750]);
    }

    #[test]
    fn quantities_are_written_back_as_people_write_them() {
        assert_eq!(format_milli(16_000), "16");
        assert_eq!(format_milli(1500), "1500m");
        assert_eq!(format_milli(2 * 1000 * (1i128 << 40)), "2Ti");
        assert_eq!(format_milli(0), "0");
        assert_eq!(format_milli(1000 * 1000), "1000");
    }
}
