//! MultiKueue objects of a fleet (docs/fleet.md "MultiKueue"; Kueue v0.19.2, issue 31): on the
//! manager one `MultiKueueCluster` per worker (its kubeconfig in a Secret of Kueue's namespace,
//! which `fleet apply` writes, never rendered), one `MultiKueueConfig` listing the workers in
//! order, one `AdmissionCheck` naming it, and the dispatching ClusterQueues' admission-check
//! strategy; on each worker the ServiceAccount, its long-lived token Secret (filled by the
//! worker's token controller) and the ClusterRole and binding the manager uses.

use serde_json::{Value, json};

use super::model::Fleet;
use gpuctl_pipeline::render::{Phase, RenderedObject};

/// Kueue's facts for MultiKueue (profiles/queueing.yaml `multikueue`).
fn facts() -> &'static gpuctl_model::profiles::MultiKueueFacts {
    &gpuctl_model::profiles::Catalog::embedded()
        .queueing()
        .multikueue
}

/// Kueue's own namespace: MultiKueueCluster Secrets must be in it (profiles/queueing.yaml).
pub fn kueue_namespace() -> &'static str {
    &facts().namespace
}

/// The `apiVersion` gpuctl writes Kueue's objects with (profiles/queueing.yaml `kueue`).
fn kueue_api() -> String {
    let kueue = &gpuctl_model::profiles::Catalog::embedded().queueing().kueue;
    format!("{}/{}", kueue.group, kueue.renders)
}

/// The ServiceAccount the manager uses on each worker, in [`kueue_namespace`].
pub const SERVICE_ACCOUNT: &str = "gpuctl-multikueue";
/// Its long-lived token Secret on each worker.
pub const TOKEN_SECRET: &str = "gpuctl-multikueue-token";
/// The AdmissionCheck (and MultiKueueConfig) name on the manager.
pub const CHECK: &str = "multikueue";

/// The Secret on the manager holding `worker`'s kubeconfig (key `kubeconfig`).
pub fn secret_name(worker: &str) -> String {
    format!("multikueue-{worker}")
}

/// What `cluster` is in the fleet's MultiKueue wiring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It dispatches.
    Manager,
    /// It runs what the manager dispatches.
    Worker,
    /// Neither.
    None,
}

/// `cluster`'s role.
pub fn role(fleet: &Fleet, cluster: &str) -> Role {
    match &fleet.spec.multi_kueue {
        Some(mk) if mk.manager == cluster => Role::Manager,
        Some(mk) if mk.workers.iter().any(|w| w == cluster) => Role::Worker,
        _ => Role::None,
    }
}

/// The ClusterRole's rules on a worker: Kueue's recipe
/// (site/static/examples/multikueue/create-multikueue-kubeconfig.sh: the jobs it mirrors, their
/// pods, Kueue's workloads; profiles/queueing.yaml `multikueue.worker_rules`), then, for every
/// framework the manager enables whose kind the recipe does not cover, the same two rules the
/// recipe gives Job (`job_verbs` on the kind, `status_verbs` on its status): Kueue's MultiKueue
/// client lists and watches every enabled framework's kind on each worker.
fn rules(manager_frameworks: &[String]) -> Value {
    let f = facts();
    let mut out: Vec<Value> = f
        .worker_rules
        .iter()
        .map(|r| json!({"apiGroups": r.api_groups, "resources": r.resources, "verbs": r.verbs}))
        .collect();
    let covered = |group: &str, resource: &str| {
        f.worker_rules.iter().any(|r| {
            r.api_groups.iter().any(|g| g == group) && r.resources.iter().any(|x| x == resource)
        })
    };
    let mut kinds: Vec<&gpuctl_model::profiles::FrameworkResource> = manager_frameworks
        .iter()
        .filter_map(|name| f.framework_resources.get(name))
        .filter(|k| !covered(&k.group, &k.resource))
        .collect();
    kinds.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
    kinds.dedup();
    for k in kinds {
        out.push(json!({"apiGroups": [k.group], "resources": [k.resource], "verbs": f.job_verbs}));
        out.push(
            json!({"apiGroups": [k.group], "resources": [format!("{}/status", k.resource)],
            "verbs": f.status_verbs}),
        );
    }
    Value::Array(out)
}

/// The labels every rendered object carries with the same value (the ApplySet membership and
/// any blueprint-wide label), never one object's own: a Namespace's Pod Security labels do not
/// belong on a MultiKueueConfig.
fn shared_labels(objects: &[RenderedObject]) -> Value {
    let labels = |o: &RenderedObject| {
        o.manifest
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
    };
    let mut shared = objects.first().and_then(labels).unwrap_or_default();
    for o in objects.iter().skip(1) {
        let these = labels(o).unwrap_or_default();
        shared.retain(|k, v| these.get(k) == Some(v));
    }
    Value::Object(shared)
}

/// Adds `cluster`'s MultiKueue objects to its rendered objects (nothing when it has no role),
/// keeping them sorted; `manager_frameworks` are the frameworks the manager's Kueue enables
/// ([`super::LoadedFleet::manager_frameworks`]), which a worker's ClusterRole must let it use.
pub fn add(
    fleet: &Fleet,
    cluster: &str,
    manager_frameworks: &[String],
    objects: &mut Vec<RenderedObject>,
) {
    let Some(mk) = &fleet.spec.multi_kueue else {
        return;
    };
    let labels = shared_labels(objects);
    let mut add = |api: &str, kind: &str, ns: Option<&str>, name: &str, body: Value| {
        let mut manifest = json!({"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "labels": labels}});
        if let Some(ns) = ns {
            manifest["metadata"]["namespace"] = json!(ns);
        }
        if let (Some(m), Some(b)) = (manifest.as_object_mut(), body.as_object()) {
            for (k, v) in b {
                if k == "annotations" {
                    m["metadata"]["annotations"] = v.clone();
                } else {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        objects.push(RenderedObject {
            phase: Phase::Queues,
            api_version: api.into(),
            kind: kind.into(),
            namespace: ns.map(str::to_string),
            name: name.into(),
            manifest,
        });
    };
    match role(fleet, cluster) {
        Role::None => return,
        Role::Worker => {
            let ns = Some(kueue_namespace());
            add("v1", "ServiceAccount", ns, SERVICE_ACCOUNT, json!({}));
            add(
                "v1",
                "Secret",
                ns,
                TOKEN_SECRET,
                json!({"type": "kubernetes.io/service-account-token",
                    "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT}}),
            );
            let rbac = "rbac.authorization.k8s.io/v1";
            add(
                rbac,
                "ClusterRole",
                None,
                SERVICE_ACCOUNT,
                json!({"rules": rules(manager_frameworks)}),
            );
            add(
                rbac,
                "ClusterRoleBinding",
                None,
                SERVICE_ACCOUNT,
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": SERVICE_ACCOUNT},
                    "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                    "namespace": kueue_namespace()}]}),
            );
        }
        Role::Manager => {
            let api = kueue_api();
            for w in &mk.workers {
                add(
                    &api,
                    "MultiKueueCluster",
                    None,
                    w,
                    json!({"spec": {"clusterSource": {"kubeConfig": {
                        "locationType": "Secret", "location": secret_name(w)}}}}),
                );
            }
            add(
                &api,
                "MultiKueueConfig",
                None,
                CHECK,
                json!({"spec": {"clusters": mk.workers}}),
            );
            add(
                &api,
                "AdmissionCheck",
                None,
                CHECK,
                json!({"spec": {"controllerName": facts().controller_name, "parameters": {
                    "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CHECK}}}),
            );
        }
    }
    if role(fleet, cluster) == Role::Worker {
        // The ServiceAccount goes one phase ahead of its token Secret (the objects of one phase
        // are applied concurrently): the token controller deletes a token Secret whose
        // ServiceAccount it cannot find (kubernetes v1.35.4
        // pkg/controller/serviceaccount/tokens_controller.go syncSecret, a live lookup), and then
        // `fleet apply` finds no token to build the worker's kubeconfig from.
        for o in objects.iter_mut() {
            if o.kind == "ServiceAccount"
                && o.name == SERVICE_ACCOUNT
                && o.namespace.as_deref() == Some(kueue_namespace())
            {
                o.phase = Phase::Quotas;
            }
        }
    }
    if role(fleet, cluster) == Role::Manager {
        for o in objects.iter_mut() {
            if o.kind == "ClusterQueue" && mk.cluster_queues.contains(&o.name) {
                o.manifest["spec"]["admissionChecksStrategy"] =
                    json!({"admissionChecks": [{"name": CHECK}]});
            }
        }
    }
    objects.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Fleet {
        serde_saphyr::from_str(
            "apiVersion: gpuctl.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  clusters:\n    - {name: hub, blueprint: a.yaml}\n    - {name: w1, blueprint: a.yaml}\n    - {name: w2, blueprint: a.yaml}\n  multiKueue: {manager: hub, workers: [w2, w1], clusterQueues: [cq]}\n",
        )
        .unwrap()
    }

    fn set() -> Vec<RenderedObject> {
        let mut s = Vec::new();
        s.push(RenderedObject {
            phase: Phase::Queues,
            api_version: kueue_api(),
            kind: "ClusterQueue".into(),
            namespace: None,
            name: "cq".into(),
            manifest: json!({"kind": "ClusterQueue", "metadata": {"name": "cq", "labels": {"a": "b"}}, "spec": {}}),
        });
        s
    }

    #[test]
    fn multikueue_objects_carry_only_the_labels_every_object_shares() {
        let mut s = vec![RenderedObject {
            phase: Phase::Foundation,
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: "gpu-operator".into(),
            manifest: json!({"kind": "Namespace", "metadata": {"name": "gpu-operator", "labels": {"a": "b", "pod-security.kubernetes.io/enforce": "privileged"}}}),
        }];
        s.extend(set());
        add(&fleet(), "hub", &[], &mut s);
        let cfg = s.iter().find(|o| o.kind == "MultiKueueConfig").unwrap();
        assert_eq!(cfg.manifest["metadata"]["labels"], json!({"a": "b"}));
    }

    #[test]
    fn multikueue_manager_objects() {
        let mut s = set();
        add(&fleet(), "hub", &[], &mut s);
        let kinds: Vec<_> = s
            .iter()
            .map(|o| (o.kind.as_str(), o.name.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("AdmissionCheck", "multikueue"),
                ("ClusterQueue", "cq"),
                ("MultiKueueCluster", "w1"),
                ("MultiKueueCluster", "w2"),
                ("MultiKueueConfig", "multikueue")
            ]
        );
        let cfg = s.iter().find(|o| o.kind == "MultiKueueConfig").unwrap();
        assert_eq!(cfg.manifest["spec"]["clusters"], json!(["w2", "w1"]));
        let cq = s.iter().find(|o| o.kind == "ClusterQueue").unwrap();
        assert_eq!(
            cq.manifest["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"],
            "multikueue"
        );
        let mkc = s.iter().find(|o| o.name == "w1").unwrap();
        assert_eq!(mkc.manifest["metadata"]["labels"]["a"], "b");
        assert_eq!(
            mkc.manifest["spec"]["clusterSource"]["kubeConfig"]["location"],
            "multikueue-w1"
        );
    }

    #[test]
    fn a_workers_role_lets_the_manager_use_every_framework_it_enables() {
        let role = |frameworks: &[&str]| {
            let frameworks: Vec<String> = frameworks.iter().map(|f| f.to_string()).collect();
            let mut s = set();
            add(&fleet(), "w1", &frameworks, &mut s);
            s.into_iter()
                .find(|o| o.kind == "ClusterRole")
                .unwrap()
                .manifest["rules"]
                .clone()
        };
        let recipe = role(&[]);
        let n = recipe.as_array().unwrap().len();
        // Job, JobSet and Pods are the recipe's already: nothing added.
        assert_eq!(
            role(&["batch/job", "jobset.x-k8s.io/jobset", "pod"]),
            recipe
        );
        // RayJob and PyTorchJob: the kind and its status each, sorted by group, once.
        let more = role(&["ray.io/rayjob", "kubeflow.org/pytorchjob", "ray.io/rayjob"]);
        let added: Vec<Value> = more.as_array().unwrap()[n..].to_vec();
        assert_eq!(
            added,
            vec![
                json!({"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["create", "delete", "get", "list", "watch"]}),
                json!({"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs/status"], "verbs": ["get"]}),
                json!({"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["create", "delete", "get", "list", "watch"]}),
                json!({"apiGroups": ["ray.io"], "resources": ["rayjobs/status"], "verbs": ["get"]}),
            ]
        );
    }

    #[test]
    fn multikueue_worker_objects_and_none() {
        let mut s = set();
        add(&fleet(), "w1", &[], &mut s);
        let kinds: Vec<_> = s.iter().map(|o| o.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "ClusterQueue",
                "ClusterRole",
                "ClusterRoleBinding",
                "Secret"
            ]
        );
        // The ServiceAccount is applied a phase before its token Secret.
        assert!(s[0].phase < s.iter().find(|o| o.kind == "Secret").unwrap().phase);
        let cq = s.iter().find(|o| o.kind == "ClusterQueue").unwrap();
        assert!(cq.manifest["spec"].get("admissionChecksStrategy").is_none());
        let mut f = fleet();
        f.spec.multi_kueue = None;
        let mut s = set();
        add(&f, "hub", &[], &mut s);
        assert_eq!(s.len(), 1);
    }
}
