//! A stand-in for NVIDIA's MIG Manager, for cluster tests where it does not run (no kubelet, no
//! GPUs): once gpuctl sets a node's `nvidia.com/mig.config`, MIG Manager reconfigures the GPUs and
//! reports `nvidia.com/mig.config.state=success`; this task reports it at once. The upgrade tests'
//! `support::operator_driver` plays MIG Manager with its `pending` and `failed` states too.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

/// The label gpuctl sets to a pool's MIG config.
pub const CONFIG: &str = "nvidia.com/mig.config";
/// The label MIG Manager reports on.
pub const STATE: &str = "nvidia.com/mig.config.state";

/// Plays MIG Manager on the nodes `selector` matches (every 200 ms until aborted): a node whose
/// `nvidia.com/mig.config` is set and differs from what it last applied there, or whose state is
/// not `success`, gets `nvidia.com/mig.config.state=success`.
pub fn stand_in(client: Client, selector: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let nodes: Api<Node> = Api::all(client);
        let mut applied: BTreeMap<String, String> = BTreeMap::new();
        loop {
            if let Ok(list) = nodes.list(&ListParams::default().labels(&selector)).await {
                for n in list {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    let labels = n.metadata.labels.clone().unwrap_or_default();
                    let Some(config) = labels.get(CONFIG) else {
                        continue;
                    };
                    let reported = labels.get(STATE).map(String::as_str) == Some("success");
                    if reported && applied.get(&name) == Some(config) {
                        continue;
                    }
                    let p = json!({"metadata": {"labels": {STATE: "success"}}});
                    if nodes
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
                        .await
                        .is_ok()
                    {
                        applied.insert(name, config.clone());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}
