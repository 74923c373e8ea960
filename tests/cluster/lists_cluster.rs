//! The cluster crate's one bulk read (`gpuctl_cluster::lists`, issue 28) against the real API
//! server: pages (`limit` and `continue`) handed over in order and whole, a reader that stops a
//! kind early, Pods listed without those that have `Succeeded` (the field selector of the Day-2
//! table; `Failed` ones are kept), a kind the cluster does not serve (found by discovery, and a
//! LIST answered 404), and a kind the credentials may not list (a ServiceAccount token from the
//! TokenRequest API with no role: the API server's own RBAC answers 403, with the identity in its
//! message). And `gpuctl status`'s reading lists only its own kinds.

use crate::support;

use gpuctl_cluster::lists::{self, Listing, Query, Want};
use gpuctl_core::diagnostics::{DiagKind, STATUS_READS, UnreadWhy};
use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{ApiResource, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cluster::{TestCluster, gpuctl_kube};

const CONFIG_MAP: Want<'static> = Want {
    group: "",
    kind: "ConfigMap",
    versions: &["v1"],
    fields: "",
};

fn names(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|v| {
            v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The test namespace's objects of `want`, `limit` a page.
async fn query(k: &gpuctl_cluster::Kube, tc: &TestCluster, want: Want<'_>, limit: u32) -> Query {
    let r = lists::resolve(k, &[want]).await.remove(0);
    let mut q = Query::all(r.expect("discovery").expect("served"), want.fields);
    q.namespace = Some(tc.namespace.clone());
    q.limit = limit;
    q
}

#[needs_test_cluster]
#[tokio::test]
async fn pages_come_in_order_and_finished_pods_stay_on_the_server() {
    let Some(tc) = TestCluster::connect("lists_pages").await else {
        return;
    };
    let cms = tc.namespaced::<ConfigMap>();
    for i in 0..7 {
        let cm = json!({"metadata": {"name": format!("cm-{i}"), "labels": tc.owner_labels()}});
        cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
            .await
            .expect("config map");
    }
    // No kubelet runs: the phase is written through the status subresource, as the kubelet does.
    let pods = tc.namespaced::<Pod>();
    for (name, phase) in [
        ("a-failed", "Failed"),
        ("b-pending", "Pending"),
        ("c-succeeded", "Succeeded"),
        ("d-running", "Running"),
    ] {
        let pod = json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}});
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .expect("pod");
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": phase}})),
        )
        .await
        .expect("pod status");
    }
    let k = gpuctl_kube().await;
    let mut cm_q = query(&k, &tc, CONFIG_MAP, 3).await;
    cm_q.labels = tc.owner_selector();
    let pod_want = Want {
        group: "",
        kind: "Pod",
        versions: &["v1"],
        fields: "status.phase!=Succeeded",
    };
    let pod_q = query(&k, &tc, pod_want, 1).await;
    let mut seen: Vec<(usize, Vec<String>)> = Vec::new();
    let requests = lists::each_page(&k, &[cm_q.clone(), pod_q.clone()], |i, listing| {
        match listing {
            Listing::Page(items) => seen.push((i, names(&items))),
            Listing::Stopped(s) => panic!("{i} stopped: {:?}", s.error),
        }
        true
    })
    .await;
    let of = |i: usize| -> Vec<Vec<String>> {
        seen.iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, n)| n.clone())
            .collect()
    };
    // Every ConfigMap page before any Pod page; pages of 3, in name order.
    assert!(seen.iter().position(|(i, _)| *i == 1) > seen.iter().rposition(|(i, _)| *i == 0));
    assert_eq!(
        of(0),
        [
            vec!["cm-0", "cm-1", "cm-2"],
            vec!["cm-3", "cm-4", "cm-5"],
            vec!["cm-6"]
        ]
    );
    let pod_pages = of(1);
    assert_eq!(
        pod_pages.concat(),
        ["a-failed", "b-pending", "d-running"],
        "the finished pod is not listed, the failed one is"
    );
    assert!(pod_pages.iter().all(|p| p.len() <= 1), "{pod_pages:?}");
    assert_eq!(requests, (3 + pod_pages.len()) as u64);

    // A reader that stops after the first page: the rest of the kind is not read (at most the
    // page already on its way), and the next kind is read whole.
    let mut first = Vec::new();
    let requests = lists::each_page(&k, &[cm_q.clone(), pod_q], |i, listing| {
        if let Listing::Page(items) = listing {
            first.push((i, names(&items)));
        }
        i == 1
    })
    .await;
    assert_eq!(
        first[0],
        (0, vec!["cm-0".into(), "cm-1".into(), "cm-2".into()])
    );
    assert_eq!(first.iter().filter(|(i, _)| *i == 0).count(), 1);
    assert!(
        requests <= 2 + pod_pages.len() as u64,
        "{requests} requests"
    );
    // Plan and apply read through the same pages.
    let all = lists::all_pages(&k, &cm_q).await.expect("all pages");
    assert_eq!(names(&all).len(), 7);
}

#[needs_test_cluster]
#[tokio::test]
async fn kinds_not_served_or_forbidden_say_so() {
    let Some(tc) = TestCluster::connect("lists_unread").await else {
        return;
    };
    let k = gpuctl_kube().await;
    let nothing = Want {
        group: "example.invalid",
        kind: "Nothing",
        versions: &["v1"],
        fields: "",
    };
    let resolved = lists::resolve(&k, &[nothing, CONFIG_MAP]).await;
    assert!(matches!(resolved[0], Ok(None)), "{:?}", resolved[0]);
    assert!(matches!(resolved[1], Ok(Some(_))));
    // A kind discovery no longer finds (its CRD was removed meanwhile): the LIST's 404.
    let gone = Query::all(
        gpuctl_cluster::client::Resolved {
            resource: ApiResource {
                group: "example.invalid".into(),
                version: "v1".into(),
                api_version: "example.invalid/v1".into(),
                kind: "Nothing".into(),
                plural: "nothings".into(),
            },
            namespaced: false,
        },
        "",
    );
    let mut why = Vec::new();
    lists::each_page(&k, &[gone], |_, listing| {
        if let Listing::Stopped(s) = listing {
            why.push(s.why);
        }
        true
    })
    .await;
    assert_eq!(why, [UnreadWhy::NotServed]);

    // An identity with no role may discover but not list.
    let kubeconfig = token_kubeconfig(&tc, "no-role").await;
    let nobody = gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(kubeconfig.path().to_path_buf()),
        context: None,
    })
    .await
    .expect("connect as the identity without a role");
    let q = query(&nobody, &tc, CONFIG_MAP, 10).await;
    let mut stopped = Vec::new();
    lists::each_page(&nobody, &[q], |_, listing| {
        match listing {
            Listing::Stopped(s) => stopped.push((s.why, s.message())),
            Listing::Page(items) => panic!("read {} objects", items.len()),
        }
        true
    })
    .await;
    let user = format!("system:serviceaccount:{}:no-role", tc.namespace);
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0].0, UnreadWhy::Forbidden);
    assert!(
        stopped[0].1.contains(&format!("User \"{user}\""))
            && stopped[0].1.contains("cannot list resource \"configmaps\""),
        "{}",
        stopped[0].1
    );
}

/// `gpuctl status` lists its five kinds and nothing else: no Event is read, and no kind it does
/// not read is reported as unread.
#[needs_test_cluster]
#[tokio::test]
async fn status_lists_only_its_kinds() {
    let Some(tc) = TestCluster::connect("lists_status").await else {
        return;
    };
    let k = gpuctl_kube().await;
    let r = gpuctl_cluster::diagnostics::read(&k, STATUS_READS, &tc.namespace, None)
        .await
        .expect("status reading");
    let d = &r.diagnostics;
    assert!(d.events.is_empty() && d.limit_ranges.is_empty() && d.workloads.is_empty());
    assert!(
        d.unread
            .iter()
            .all(|u| STATUS_READS.iter().any(|kind| kind.name() == u.kind)),
        "{:?}",
        d.unread
    );
    assert!(d.read(DiagKind::Node) && d.read(DiagKind::Pod));
    let served = STATUS_READS
        .iter()
        .filter(|kind| {
            d.unread(**kind)
                .is_none_or(|u| u.why != UnreadWhy::NotServed)
        })
        .count();
    assert!(r.list_requests >= served as u64, "{}", r.list_requests);
}

/// A kubeconfig for ServiceAccount `sa` of the test's namespace (no role bound), with a token
/// from the TokenRequest API.
async fn token_kubeconfig(tc: &TestCluster, sa: &str) -> tempfile::NamedTempFile {
    let sas = tc.namespaced::<k8s_openapi::api::core::v1::ServiceAccount>();
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap(),
    )
    .await
    .expect("service account");
    let tr: Value = sas
        .create_subresource(
            "token",
            sa,
            &PostParams::default(),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600}}),
        )
        .await
        .expect("token request");
    let token = tr["status"]["token"].as_str().expect("a token");
    let admin = kube::config::Kubeconfig::read_from(support::doctor::kubeconfig())
        .expect("admin kubeconfig");
    let cluster = admin.clusters[0].cluster.clone().expect("cluster");
    let kc = json!({"apiVersion": "v1", "kind": "Config", "current-context": "nobody",
        "clusters": [{"name": "harness", "cluster": {"server": cluster.server,
            "certificate-authority-data": cluster.certificate_authority_data}}],
        "users": [{"name": "nobody", "user": {"token": token}}],
        "contexts": [{"name": "nobody", "context": {"cluster": "harness", "user": "nobody"}}]});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_vec(&kc).unwrap()).unwrap();
    file
}
