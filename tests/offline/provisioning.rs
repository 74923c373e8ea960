//! Issue 40: the GPU instance types the harness's Karpenter KWOK provider offers
//! (`tools/kube-harness/karpenter/instance-types.json`) are the catalog's
//! (`profiles/provisioning.yaml`) in the provider's file format, so the real-Karpenter tests launch
//! the GPU counts, CPUs and memory gpuctl's catalog says each type has.

use serde_json::{Value, json};

use gpuctl_model::profiles::Catalog;

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tools/kube-harness/karpenter/instance-types.json"
);

/// The KWOK provider's instance-type file for every catalogued EKS type with CPUs, memory and a
/// price (Karpenter needs all three to pick an offering): one on-demand offering in the KWOK
/// provider's zone `test-zone-a`, the GPU count as `nvidia.com/gpu` (format: shared/reference/
/// node-pools.md §3.3; keys are Go's case-insensitive JSON field names of the v1.15.0 loader).
fn generated() -> String {
    let catalog = Catalog::embedded();
    let types: Vec<Value> = catalog
        .provisioning()
        .instance_types
        .iter()
        .filter(|(_, t)| t.platform == "eks")
        .filter_map(|(name, t)| {
            let (cpu, mem, price) = (t.vcpu?, t.memory_mib?, t.price?);
            Some(json!({
                "name": name,
                "architecture": "amd64",
                "operatingSystems": ["linux"],
                "resources": {
                    "cpu": cpu.to_string(),
                    "memory": format!("{mem}Mi"),
                    "pods": "110",
                    "nvidia.com/gpu": t.gpus.to_string(),
                },
                "offerings": [{
                    "Price": price,
                    "Available": true,
                    "Requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]},
                    ],
                }],
            }))
        })
        .collect();
    serde_json::to_string_pretty(&types).unwrap() + "\n"
}

#[test]
fn kwok_instance_types_are_the_catalogs() {
    let g = generated();
    if std::env::var_os("GPUCTL_UPDATE_DOCS").is_some() {
        std::fs::write(FILE, &g).unwrap();
    }
    let on_disk = std::fs::read_to_string(FILE).unwrap();
    assert!(
        on_disk == g,
        "{FILE} differs from profiles/provisioning.yaml: run this test with GPUCTL_UPDATE_DOCS=1"
    );
    // The tests need an 8-GPU H100 type and a 1-GPU L40S type.
    let v: Vec<Value> = serde_json::from_str(&on_disk).unwrap();
    let gpus = |name: &str| {
        v.iter()
            .find(|t| t["name"] == name)
            .map(|t| t["resources"]["nvidia.com/gpu"].clone())
    };
    assert_eq!(gpus("p5.48xlarge"), Some(json!("8")));
    assert_eq!(gpus("g6e.xlarge"), Some(json!("1")));
}

/// The NodeClass group and kind gpuctl writes into each platform's NodePools
/// (`profiles/provisioning.yaml` `karpenter.node_classes`) are the ones the providers' CRDs serve
/// (`../shared/upstream-provisioning/`): gpuctl renders no NodeClass, so this is how far the cloud
/// NodeClasses are checked.
#[test]
fn node_class_refs_match_the_providers_crds() {
    let shared =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/upstream-provisioning");
    let crds = [
        (
            "eks",
            "karpenter-aws/v1.14.1/crds/karpenter.k8s.aws_ec2nodeclasses.yaml",
        ),
        (
            "aks",
            "karpenter-azure/v1.14.2/crds/karpenter.azure.com_aksnodeclasses.yaml",
        ),
        (
            "kwok",
            "karpenter/v1.15.0/kwok/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
        ),
    ];
    let classes = &Catalog::embedded().provisioning().karpenter.node_classes;
    assert_eq!(classes.len(), crds.len());
    for (platform, file) in crds {
        let text =
            std::fs::read_to_string(shared.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let crd: Value = serde_saphyr::from_str(&text).unwrap();
        let c = &classes[platform];
        assert_eq!(crd["spec"]["group"], c.group.as_str(), "{platform}");
        assert_eq!(crd["spec"]["names"]["kind"], c.kind.as_str(), "{platform}");
    }
}

/// A Cluster API MIG pool gets the Cluster Autoscaler's scale-from-zero annotations (its one MIG
/// resource, labels, the readiness taint), and a managed EKS pool the settings its node group must
/// have, as documents; neither gets a NodePool.
#[test]
fn cluster_api_and_managed_pools_render_their_documents() {
    let text = r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: capi
spec:
  kubernetes:
    version: "1.34.2"
  gpuOperator:
    version: v26.7.0
    driver:
      version: "580.173.02"
      kernelModuleType: open
  nodeReadiness: { taintKey: readiness.k8s.io/nvidia-gpu-not-ready, signal: external }
  nodePools:
    - name: mig
      role: inference
      selector: { gpuctl.dev/pool: mig }
      nodes: 0
      gpu: { model: H100-SXM5-80GB, count: 8 }
      partitioning:
        mode: mig
        mig: { strategy: mixed, layout: { "1g.10gb": 7 } }
      provisioner: { type: clusterAPI, minNodes: 0, maxNodes: 3, machineDeployment: { name: gpu-md-0, namespace: capi } }
    - name: eks-l40s
      role: general
      selector: { gpuctl.dev/pool: eks-l40s }
      nodes: 1
      gpu: { model: L40S, count: 1 }
      provisioner: { type: managed, platform: eks, minNodes: 1, maxNodes: 4, instanceTypes: [g6e.xlarge] }
"#;
    let set = crate::render_common::render_text("capi.yaml", text);
    assert!(
        set.objects.iter().all(|o| o.kind != "NodePool"),
        "no NodePool for these provisioners"
    );
    let capi = &set.documents["cluster-api/mig.yaml"];
    for want in [
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: \"0\"",
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"3\"",
        "capacity.cluster-autoscaler.kubernetes.io/gpu-type: nvidia.com/mig-1g.10gb",
        "capacity.cluster-autoscaler.kubernetes.io/gpu-count: \"56\"",
        "cluster-api/accelerator=H100-SXM5-80GB",
        "readiness.k8s.io/nvidia-gpu-not-ready=pending:NoSchedule",
        "name: gpu-md-0",
    ] {
        assert!(capi.contains(want), "{want} missing from:\n{capi}");
    }
    let managed = &set.documents["managed/eks-l40s.md"];
    assert!(managed.contains("size: min 1, max 4"), "{managed}");
    assert!(managed.contains("driver: host"), "{managed}");
    // The host driver is turned off for the operator on the pool's nodes.
    let patch = set
        .node_patches
        .iter()
        .find(|p| p.pool == "eks-l40s")
        .unwrap();
    assert_eq!(
        patch
            .labels
            .get("nvidia.com/gpu.deploy.driver")
            .map(String::as_str),
        Some("false")
    );
}
