//! Table cases of the provisioned-pool rules (GPU1400-GPU1408), on a base whose training pool
//! Karpenter provisions on EKS (2..4 nodes) and whose MIG pool scales from zero with its own taint,
//! gated by one readiness key.

use super::{Case, KUEUE_BASE, edit};

const TRAIN_GPU: &str = "      nodes: 4\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n";
const TRAIN_PROVISIONER: &str = "      nodes: 4
      gpu: { model: H100-SXM5-80GB, count: 8 }
      provisioner:
        type: karpenter
        platform: eks
        nodeClass: gpu
        minNodes: 2
        maxNodes: 4
        instanceTypes: [p5.48xlarge]
";
const INFER_GPU: &str = "      nodes: 2\n      gpu: { model: A100-SXM4-80GB, count: 8 }\n";
const INFER_PROVISIONER: &str = "      nodes: 2
      gpu: { model: A100-SXM4-80GB, count: 8 }
      provisioner: { type: karpenter, platform: eks, nodeClass: gpu, minNodes: 0, maxNodes: 2, instanceTypes: [p4de.24xlarge] }
      taints:
        - { key: gpuctl.dev/mig, value: infer, effect: NoSchedule }
";
const READINESS: &str =
    "  nodeReadiness: { taintKey: readiness.k8s.io/nvidia-gpu-not-ready }\n  nodePools:\n";

/// The Kueue base with provisioned pools, clean.
pub(super) fn prov_base() -> String {
    edit(
        KUEUE_BASE,
        &[
            (TRAIN_GPU, TRAIN_PROVISIONER),
            (INFER_GPU, INFER_PROVISIONER),
            ("  nodePools:\n", READINESS),
        ],
    )
}

const DCGM: &str = "    dcgmExporter: { enabled: true, interval: 30s }\n";

pub(super) fn cases() -> Vec<Case> {
    let b = prov_base();
    vec![
        (
            "GPU1400",
            b.clone(),
            vec![(
                "taintKey: readiness.k8s.io/nvidia-gpu-not-ready",
                "taintKey: nvidia.com/gpu-not-ready",
            )],
        ),
        (
            "GPU1400",
            b.clone(),
            vec![(
                DCGM,
                "    dcgmExporter: { enabled: true, interval: 30s }\n    values: { daemonsets: { tolerations: [{ key: nvidia.com/gpu, operator: Exists, effect: NoSchedule }] } }\n",
            )],
        ),
        (
            "GPU1400",
            b.clone(),
            vec![(
                "{ key: gpuctl.dev/mig, value: infer, effect: NoSchedule }",
                "{ key: readiness.k8s.io/other, value: infer, effect: NoSchedule }",
            )],
        ),
        (
            "GPU1401",
            b.clone(),
            vec![(
                "instanceTypes: [p4de.24xlarge] }",
                "instanceTypes: [p4de.24xlarge], nodeOverlay: false }",
            )],
        ),
        (
            "GPU1402",
            b.clone(),
            vec![
                ("        minNodes: 2\n", "        minNodes: 0\n"),
                (
                    "      labels: { gpu.example.com/tier: premium }\n",
                    "      gpuPlugin: dra\n      labels: { gpu.example.com/tier: premium }\n",
                ),
            ],
        ),
        (
            "GPU1403",
            b.clone(),
            vec![(
                "        nodeClass: gpu\n",
                "        nodeClass: gpu\n        driver: operator\n",
            )],
        ),
        (
            "GPU1403",
            b.clone(),
            vec![(
                "      labels: { gpu.example.com/tier: premium }\n",
                "      operands: { driver: true }\n      labels: { gpu.example.com/tier: premium }\n",
            )],
        ),
        (
            "GPU1404",
            b.clone(),
            vec![(
                "instanceTypes: [p5.48xlarge]",
                "instanceTypes: [p4d.24xlarge]",
            )],
        ),
        (
            "GPU1404",
            b.clone(),
            vec![(
                "instanceTypes: [p5.48xlarge]",
                "instanceTypes: [p5.48xlarg]",
            )],
        ),
        (
            "GPU1405",
            b.clone(),
            vec![(
                "{ key: gpuctl.dev/mig, value: infer, effect: NoSchedule }",
                "{ key: nvidia.com/gpu, value: present, effect: NoSchedule }",
            )],
        ),
        (
            "GPU1406",
            b.clone(),
            vec![(
                "      nodes: 4\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "      nodes: 2\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
            )],
        ),
        // Each queue fits the 24 GPUs of three nodes alone (8 and 24); together they promise 32,
        // which the pool has only at maxNodes 4.
        (
            "GPU1406",
            b.clone(),
            vec![(
                "      nodes: 4\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "      nodes: 3\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
            )],
        ),
        (
            "GPU1407",
            b.clone(),
            vec![(
                "        maxNodes: 4\n",
                "        maxNodes: 4\n        disruption: { consolidationPolicy: WhenEmptyOrUnderutilized }\n",
            )],
        ),
        (
            "GPU1407",
            b.clone(),
            vec![(
                "        maxNodes: 4\n",
                "        maxNodes: 4\n        expireAfter: 720h\n",
            )],
        ),
        (
            "GPU1408",
            b.clone(),
            vec![("        minNodes: 2\n", "        minNodes: 5\n")],
        ),
        (
            "GPU1408",
            b.clone(),
            vec![(
                "      gpu: { model: L4, count: 4 }\n",
                "      gpu: { model: L4, count: 4 }\n      provisioner: { maxNodes: 3 }\n",
            )],
        ),
        ("GPU1408", b, vec![("        nodeClass: gpu\n", "")]),
    ]
}

pub(super) fn passing_cases() -> Vec<Case> {
    let b = prov_base();
    vec![
        (
            "GPU1400",
            b.clone(),
            vec![(
                DCGM,
                "    dcgmExporter: { enabled: true, interval: 30s }\n    values: { daemonsets: { tolerations: [{ key: nvidia.com/gpu, operator: Exists, effect: NoSchedule }, { key: readiness.k8s.io/nvidia-gpu-not-ready, operator: Exists, effect: NoSchedule }] } }\n",
            )],
        ),
        (
            "GPU1401",
            b.clone(),
            vec![(
                "minNodes: 0, maxNodes: 2, instanceTypes: [p4de.24xlarge] }",
                "minNodes: 1, maxNodes: 2, instanceTypes: [p4de.24xlarge], nodeOverlay: false }",
            )],
        ),
        (
            "GPU1402",
            b.clone(),
            vec![(
                "      labels: { gpu.example.com/tier: premium }\n",
                "      gpuPlugin: dra\n      labels: { gpu.example.com/tier: premium }\n",
            )],
        ),
        (
            "GPU1403",
            b.clone(),
            vec![(
                "        nodeClass: gpu\n",
                "        nodeClass: gpu\n        driver: host\n",
            )],
        ),
        (
            "GPU1404",
            b.clone(),
            vec![
                ("        platform: eks\n", "        platform: aks\n"),
                (
                    "instanceTypes: [p5.48xlarge]",
                    "instanceTypes: [Standard_ND96isr_H100_v5]",
                ),
            ],
        ),
        ("GPU1405", b.clone(), vec![]),
        ("GPU1406", b.clone(), vec![]),
        (
            "GPU1407",
            b.clone(),
            vec![(
                "        maxNodes: 4\n",
                "        maxNodes: 4\n        expireAfter: Never\n        disruption: { consolidationPolicy: WhenEmptyOrUnderutilized, budgets: [{ nodes: \"0\", reasons: [Underutilized] }] }\n",
            )],
        ),
        ("GPU1408", b, vec![]),
    ]
}

/// GPU1406 sums the queues that draw on one pool: with three nodes (24 GPUs) cq-train's 8 and
/// cq-burst's 24 each fit alone, their 32 only at `maxNodes`; the finding names both.
#[test]
fn gpu1406_sums_the_queues_of_one_pool() {
    let text = edit(
        &prov_base(),
        &[(
            "      nodes: 4\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
            "      nodes: 3\n      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
        )],
    );
    let r = super::run(&text);
    let f: Vec<_> = r.findings.iter().filter(|f| f.rule == "GPU1406").collect();
    assert_eq!(f.len(), 1, "{f:?}");
    for want in [
        "`cq-train` (8)",
        "`cq-burst` (24)",
        "promise 32 together",
        "has 24",
    ] {
        assert!(f[0].message.contains(want), "{want}: {}", f[0].message);
    }
}
