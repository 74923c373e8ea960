//! Table cases of the DRA rules (GPU170-GPU174), on a base with a whole-GPU pool, a MIG pool,
//! three shapes and a tenant that claims two of them.

use super::{Case, KUEUE_BASE, edit, rules, run};

pub(super) const DRA_BASE: &str = include_str!("../../../../../tests/fixtures/dra/shapes.yaml");

fn d() -> String {
    DRA_BASE.to_string()
}

/// The base deployed through the GPU Operator's GPUCluster (`spec.dra.driver`).
fn gc() -> String {
    edit(
        DRA_BASE,
        &[(
            "  dra:\n    shapes:\n",
            "  dra:\n    driver: { deployment: gpuCluster }\n    shapes:\n",
        )],
    )
}

/// The base with a GB200 NVL72 pool, an NVLink domain (the clique label in its topology), and the
/// tenant allowed 2 ComputeDomains.
fn cd() -> String {
    edit(
        DRA_BASE,
        &[
            (
                "  dra:\n    shapes:\n",
                "    - name: gb200\n      selector: { gpuctl.dev/pool: gb200 }\n      nodes: 18\n      gpu: { model: GB200, count: 4 }\n      topology: { levels: [nvidia.com/gpu.clique, kubernetes.io/hostname] }\n  dra:\n    shapes:\n",
            ),
            (
                "      quota: { pods: 50 }",
                "      quota: { pods: 50 }\n      computeDomains: 2",
            ),
        ],
    )
}

/// The base on the standalone path: the DRA chart v25.12.0 next to the ClusterPolicy, the H100
/// pool moved to DRA, the A100 pool left on the device plugin.
fn sa() -> String {
    edit(
        DRA_BASE,
        &[
            (
                "  dra:\n    shapes:\n",
                "  dra:\n    driver: { deployment: standalone, version: v25.12.0 }\n    shapes:\n",
            ),
            (
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      gpuPlugin: dra\n",
            ),
        ],
    )
}

const DRA_POOL: &str = "      gpuPlugin: dra\n";

/// The A100 (MIG) pool moved to DRA too.
const A100_TO_DRA: (&str, &str) = (
    "      gpu: { model: A100-SXM4-80GB, count: 4 }\n",
    "      gpu: { model: A100-SXM4-80GB, count: 4 }\n      gpuPlugin: dra\n",
);

const TIME_SLICED: (&str, &str) = (
    "        mode: mig\n        mig:\n          strategy: mixed\n          layout: { \"1g.10gb\": 7 }",
    "        mode: time-slicing\n        timeSlicing: { replicas: 4 }",
);

/// The base with `shapes` more shapes and `namespaces` more namespaces of the claiming tenant.
fn many(shapes: usize, namespaces: usize) -> String {
    let extra: String = (0..shapes)
        .map(|i| format!("      - {{ name: s{i}, gpu: {{}} }}\n"))
        .collect();
    let ns: Vec<String> = (0..namespaces).map(|i| format!("r{i}")).collect();
    edit(
        DRA_BASE,
        &[
            ("  tenants:\n", &format!("{extra}  tenants:\n")),
            (
                "namespaces: [research]",
                &format!("namespaces: [research, {}]", ns.join(", ")),
            ),
        ],
    )
}

/// KUEUE_BASE with one H100 shape claimed by team-a, queued to `cq-train`, which has quota for
/// `nvidia.com/gpu` (the resource Kueue charges the shape to).
pub(super) fn kueue_claims() -> String {
    edit(
        KUEUE_BASE,
        &[
            (
                "  tenants:\n",
                "  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n",
            ),
            (
                "      cuda: [\"12.4\"]\n",
                "      cuda: [\"12.4\"]\n      claims: { h100: 8 }\n",
            ),
        ],
    )
}

/// [`kueue_claims`] on Kubernetes 1.36 with the standalone DRA chart v25.12.0, the train pool
/// moved to DRA, `spec.dra.extendedResources` on, and `more` whole-GPU shapes beside `h100`: the
/// chart's `gpu.nvidia.com` serves `nvidia.com/gpu`, and gpuctl maps it to that name in Kueue's
/// `deviceClassMappings` together with the shapes' classes.
fn kueue_extended(more: usize) -> String {
    let extra: String = (0..more)
        .map(|i| format!("{{name: g{i}, gpu: {{}}}}, "))
        .collect();
    edit(
        &kueue_claims(),
        &[
            ("version: \"1.34.2\"", "version: \"1.36.3\""),
            (
                "  dra:\n    shapes: [{name: h100, ",
                &format!(
                    "  dra:\n    driver: {{ deployment: standalone, version: v25.12.0 }}\n    extendedResources: true\n    shapes: [{extra}{{name: h100, "
                ),
            ),
            (
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      labels:",
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      gpuPlugin: dra\n      labels:",
            ),
        ],
    )
}

pub(super) fn cases() -> Vec<Case> {
    let nine_gpu_shapes: String = (0..9)
        .map(|i| format!("{{name: g{i}, gpu: {{}}}}, "))
        .collect();
    vec![
        (
            "GPU170",
            d(),
            vec![("version: \"1.35.1\"", "version: \"1.33.5\"")],
        ),
        (
            "GPU170",
            d(),
            vec![("version: \"1.35.1\"", "version: \"1.34.1\"")],
        ),
        ("GPU171", d(), vec![("- name: h100x8", "- name: H100x8")]),
        ("GPU171", d(), vec![("- name: h100x8", "- name: h100")]),
        (
            "GPU171",
            d(),
            vec![("        count: 8\n", "        count: 0\n")],
        ),
        (
            "GPU171",
            d(),
            vec![(
                "        mig: { profile: 1g.10gb }",
                "        mig: { profile: 1g.10gb }\n        gpu: {}",
            )],
        ),
        (
            "GPU171",
            d(),
            vec![(
                "mig: { profile: 1g.10gb }",
                "mig: { profile: 1g.12gb, model: A100-SXM4-80GB }",
            )],
        ),
        (
            "GPU171",
            d(),
            vec![("mig: { profile: 1g.10gb }", "mig: { profile: 9g.99gb }")],
        ),
        (
            "GPU171",
            d(),
            vec![(
                "gpu: { model: H100-SXM5-80GB }\n        count: 8",
                "gpu: { model: H100-SXM9 }\n        count: 8",
            )],
        ),
        ("GPU171", d(), vec![("minMemory: 64Gi", "minMemory: lots")]),
        (
            "GPU171",
            d(),
            vec![("minDriver: \"580.95.05\"", "minDriver: \"580.x\"")],
        ),
        (
            "GPU172",
            d(),
            vec![("        count: 8\n", "        count: 16\n")],
        ),
        (
            "GPU172",
            d(),
            vec![(
                "gpu: { model: H100-SXM5-80GB }\n        count: 8",
                "gpu: { model: A100-SXM4-80GB }\n        count: 1",
            )],
        ),
        (
            "GPU172",
            d(),
            vec![(
                "minComputeCapability: \"9.0\"",
                "minComputeCapability: \"10.0\"",
            )],
        ),
        (
            "GPU172",
            d(),
            vec![("minDriver: \"580.95.05\"", "minDriver: \"600.10\"")],
        ),
        ("GPU172", d(), vec![("minMemory: 64Gi", "minMemory: 96Gi")]),
        (
            "GPU172",
            d(),
            vec![("mig: { profile: 1g.10gb }", "mig: { profile: 3g.40gb }")],
        ),
        (
            "GPU173",
            d(),
            vec![(
                "claims: { h100: 8, mig-1g: 14 }",
                "claims: { h10: 8, mig-1g: 14 }",
            )],
        ),
        (
            "GPU173",
            d(),
            vec![("claims: { h100: 8, mig-1g: 14 }", "claims: { h100x8: 4 }")],
        ),
        // Queued to `cq-infer`, whose quota has MIG devices only: Kueue charges the H100 shape to
        // `nvidia.com/gpu`, which it does not cover.
        (
            "GPU173",
            edit(
                KUEUE_BASE,
                &[
                    (
                        "  tenants:\n",
                        "  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n",
                    ),
                    (
                        "      cuda: [\"12.8\"]\n",
                        "      cuda: [\"12.8\"]\n      claims: { h100: 8 }\n",
                    ),
                ],
            ),
            vec![],
        ),
        // Kueue v0.17: DRA integration off by default.
        (
            "GPU173",
            kueue_claims(),
            vec![("version: v0.19.2", "version: v0.17.0")],
        ),
        // Nine classes in Kueue's mapping for `nvidia.com/gpu`: Kueue allows eight.
        (
            "GPU173",
            edit(
                &kueue_claims(),
                &[(
                    "shapes: [{name: h100, ",
                    &format!("shapes: [{nine_gpu_shapes}{{name: h100, "),
                )],
            ),
            vec![],
        ),
        // Eight shapes charged to `nvidia.com/gpu` (Kueue's limit), plus the chart's
        // `gpu.nvidia.com` that serves the name to pods under `extendedResources`: nine.
        ("GPU173", kueue_extended(7), vec![]),
        // 403 classes in 251 namespaces: over gpuctl's bound on DRA quota keys.
        ("GPU173", many(400, 250), vec![]),
        (
            "GPU174",
            d(),
            vec![(
                "quota: { pods: 50 }",
                "quota: { pods: 50, gpu.nvdia.com.deviceclass.resource.k8s.io/devices: 8 }",
            )],
        ),
        (
            "GPU174",
            d(),
            vec![(
                "quota: { pods: 50 }",
                "quota: { pods: 50, requests.gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 8 }",
            )],
        ),
        (
            "GPU175",
            gc(),
            vec![("version: v26.7.0", "version: v25.10.1")],
        ),
        (
            "GPU175",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, version: v9.9.9 }",
            )],
        ),
        (
            "GPU175",
            gc(),
            vec![("version: \"595.91.07\"", "version: \"570.195.03\"")],
        ),
        (
            "GPU175",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, featureGates: { DynamicMig: true } }",
            )],
        ),
        (
            "GPU175",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, featureGates: { DynamicMIG: true, MPSSupport: true } }",
            )],
        ),
        (
            "GPU175",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, featureGates: { DeviceMetadata: true } }",
            )],
        ),
        (
            "GPU165",
            sa(),
            vec![(
                "deployment: standalone, version: v25.12.0 }",
                "deployment: standalone }",
            )],
        ),
        (
            "GPU165",
            sa(),
            vec![("version: v25.12.0 }", "version: v9.9.9 }")],
        ),
        (
            "GPU165",
            sa(),
            vec![("version: \"1.35.1\"", "version: \"1.34.1\"")],
        ),
        (
            "GPU165",
            sa(),
            vec![("version: \"595.91.07\"", "version: \"560.35.03\"")],
        ),
        (
            "GPU165",
            sa(),
            vec![(
                "version: v25.12.0 }",
                "version: v25.12.0, featureGates: { DynamicMIG: true, MPSSupport: true } }",
            )],
        ),
        (
            "GPU165",
            edit(
                &sa(),
                &[(
                    "deployment: standalone, version: v25.12.0 }",
                    "deployment: gpuCluster }",
                )],
            ),
            vec![],
        ),
        (
            "GPU165",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, install: helm }",
            )],
        ),
        (
            "GPU165",
            d(),
            vec![(
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      gpuPlugin: dra\n",
            )],
        ),
        (
            "GPU166",
            sa(),
            vec![(
                DRA_POOL,
                "      gpuPlugin: dra\n      operands: { devicePlugin: true }\n",
            )],
        ),
        (
            "GPU166",
            sa(),
            vec![(
                DRA_POOL,
                "      gpuPlugin: dra\n      labels: { nvidia.com/gpu.deploy.device-plugin: \"true\" }\n",
            )],
        ),
        (
            "GPU166",
            sa(),
            vec![(
                "      gpu: { model: A100-SXM4-80GB, count: 4 }\n",
                "      gpu: { model: A100-SXM4-80GB, count: 4 }\n      labels: { nvidia.com/dra-kubelet-plugin: \"true\" }\n",
            )],
        ),
        (
            "GPU167",
            sa(),
            vec![(
                DRA_POOL,
                "      gpuPlugin: dra\n      partitioning: { mode: time-slicing, timeSlicing: { replicas: 4 } }\n",
            )],
        ),
        ("GPU168", sa(), vec![(DRA_POOL, "")]),
        ("GPU169", sa(), vec![]),
        ("GPU176", gc(), vec![TIME_SLICED]),
        ("GPU177", gc(), vec![]),
        (
            "GPU157",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, featureGates: { DynamicMIG: true } }",
            )],
        ),
        (
            "GPU178",
            gc(),
            vec![(
                "namespaces: [research]",
                "namespaces: [research, gpu-operator]",
            )],
        ),
        (
            "GPU179",
            cd(),
            vec![("version: \"1.35.1\"", "version: \"1.33.5\"")],
        ),
        (
            "GPU179",
            cd(),
            vec![(
                "  dra:\n    shapes:\n",
                "  dra:\n    driver: { deployment: gpuCluster, computeDomains: false }\n    shapes:\n",
            )],
        ),
        (
            "GPU179",
            cd(),
            vec![(
                "levels: [nvidia.com/gpu.clique, kubernetes.io/hostname]",
                "levels: [kubernetes.io/hostname]",
            )],
        ),
        (
            "GPU179",
            cd(),
            vec![("version: \"595.91.07\"", "version: \"570.148.08\"")],
        ),
        // An HGX H100 pool naming the clique level is no NVLink domain (GPU Feature Discovery
        // labels only fabric-attached GPUs), even beside a GB200 pool.
        (
            "GPU179",
            cd(),
            vec![(
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      topology: { levels: [nvidia.com/gpu.clique] }\n",
            )],
        ),
        // DynamicMIG on a DRA pool whose MIG layout the ClusterPolicy's MIG Manager applies.
        (
            "GPU165",
            sa(),
            vec![
                A100_TO_DRA,
                (
                    "version: v25.12.0 }",
                    "version: v25.12.0, featureGates: { DynamicMIG: true } }",
                ),
            ],
        ),
        // extendedResources on 1.35 (the gate is alpha: the field is dropped).
        (
            "GPU158",
            ext(),
            vec![("version: \"1.36.3\"", "version: \"1.35.1\"")],
        ),
        // ... without a driver deployment (who owns nvidia.com/gpu?).
        (
            "GPU158",
            ext(),
            vec![(
                "    driver: { deployment: standalone, version: v25.12.0 }\n",
                "",
            )],
        ),
        // ... with no pool on DRA.
        ("GPU158", ext(), vec![(DRA_POOL, "")]),
        // DeviceTaintRules and tolerations on 1.35.
        (
            "GPU159",
            taints(),
            vec![("version: \"1.36.3\"", "version: \"1.35.1\"")],
        ),
        // `Exists` with a value; a maintenance name that is no DNS label; twice the same name.
        (
            "GPU159",
            taints(),
            vec![(
                "operator: Exists, effect",
                "operator: Exists, value: \"79\", effect",
            )],
        ),
        (
            "GPU159",
            taints(),
            vec![("name: node7-rma", "name: Node7_RMA")],
        ),
        (
            "GPU159",
            taints(),
            vec![(
                "node: gpu-node-9, device: gpu-3",
                "node: gpu-node-9, device: gpu-3 }\n      - { name: node7-rma, node: gpu-node-1",
            )],
        ),
    ]
}

/// The standalone base on Kubernetes 1.36 with `extendedResources` (the H100 pool on DRA).
fn ext() -> String {
    edit(
        &sa(),
        &[
            ("version: \"1.35.1\"", "version: \"1.36.3\""),
            (
                "version: v25.12.0 }\n",
                "version: v25.12.0 }\n    extendedResources: true\n",
            ),
        ],
    )
}

/// The base on 1.36 with two maintenance entries and a tenant tolerating the driver's Xid taint.
fn taints() -> String {
    edit(
        DRA_BASE,
        &[
            ("version: \"1.35.1\"", "version: \"1.36.3\""),
            (
                "  dra:\n    shapes:\n",
                "  dra:\n    maintenance:\n      - { name: node7-rma, node: gpu-node-7 }\n      - { name: gpu3-swap, node: gpu-node-9, device: gpu-3, effect: NoExecute }\n    shapes:\n",
            ),
            (
                "      quota: { pods: 50 }",
                "      quota: { pods: 50 }\n      deviceTolerations: [{ key: gpu.nvidia.com/xid, operator: Exists, effect: NoSchedule }]",
            ),
        ],
    )
}

pub(super) fn passing_cases() -> Vec<Case> {
    vec![
        (
            "GPU170",
            d(),
            vec![("version: \"1.35.1\"", "version: \"1.34.2\"")],
        ),
        ("GPU171", d(), vec![]),
        // A model with the profile on it, and an 80 GB GPU's floor written in G.
        (
            "GPU171",
            d(),
            vec![(
                "mig: { profile: 1g.10gb }",
                "mig: { profile: 1g.10gb, model: A100-SXM4-80GB }",
            )],
        ),
        ("GPU172", d(), vec![("minMemory: 64Gi", "minMemory: 80G")]),
        (
            "GPU172",
            d(),
            vec![("minDriver: \"580.95.05\"", "minDriver: \"595.91.07\"")],
        ),
        ("GPU173", d(), vec![]),
        ("GPU173", many(40, 100), vec![]),
        ("GPU173", kueue_claims(), vec![]),
        // Seven shapes and the chart's class: eight, as many as Kueue allows.
        ("GPU173", kueue_extended(6), vec![]),
        (
            "GPU174",
            d(),
            vec![(
                "quota: { pods: 50 }",
                "quota: { pods: 50, h100.shapes.gpuctl.dev.deviceclass.resource.k8s.io/devices: 8, gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 0, count/resourceclaims.resource.k8s.io: 20 }",
            )],
        ),
        ("GPU175", gc(), vec![]),
        (
            "GPU175",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, version: v0.4.1, featureGates: { DynamicMIG: true, PassthroughSupport: false } }",
            )],
        ),
        ("GPU165", sa(), vec![]),
        (
            "GPU165",
            sa(),
            vec![(
                "version: v25.12.0 }",
                "version: v0.4.1, install: helm, featureGates: { DynamicMIG: true, PassthroughSupport: false }, values: { nameOverride: nvidia-dra-driver-gpu } }",
            )],
        ),
        ("GPU165", d(), vec![]),
        ("GPU166", sa(), vec![]),
        (
            "GPU166",
            sa(),
            vec![(
                DRA_POOL,
                "      gpuPlugin: dra\n      labels: { nvidia.com/gpu.deploy.device-plugin: \"false\", nvidia.com/dra-kubelet-plugin: \"true\" }\n      operands: { devicePlugin: false }\n",
            )],
        ),
        ("GPU167", sa(), vec![]),
        ("GPU167", edit(&sa(), &[TIME_SLICED]), vec![]),
        ("GPU168", sa(), vec![]),
        ("GPU169", sa(), vec![A100_TO_DRA]),
        ("GPU169", d(), vec![]),
        ("GPU168", gc(), vec![]),
        ("GPU176", gc(), vec![]),
        ("GPU176", d(), vec![TIME_SLICED]),
        (
            "GPU177",
            gc(),
            vec![(
                "deployment: gpuCluster }",
                "deployment: gpuCluster, featureGates: { DynamicMIG: true } }",
            )],
        ),
        ("GPU177", d(), vec![]),
        ("GPU157", gc(), vec![]),
        (
            "GPU157",
            gc(),
            vec![
                (
                    "deployment: gpuCluster }",
                    "deployment: gpuCluster, featureGates: { DynamicMIG: true } }",
                ),
                ("version: \"1.35.1\"", "version: \"1.36.0\""),
            ],
        ),
        ("GPU178", gc(), vec![]),
        (
            "GPU178",
            d(),
            vec![(
                "namespaces: [research]",
                "namespaces: [research, gpu-operator]",
            )],
        ),
        ("GPU179", cd(), vec![]),
        ("GPU179", d(), vec![]),
        ("GPU165", sa(), vec![A100_TO_DRA]),
        ("GPU158", ext(), vec![]),
        ("GPU158", d(), vec![]),
        // Under GPUCluster every pool is on DRA: gpuctl renders the class for nvidia.com/gpu.
        (
            "GPU158",
            edit(
                &gc(),
                &[
                    ("version: \"1.35.1\"", "version: \"1.36.3\""),
                    (
                        "deployment: gpuCluster }\n",
                        "deployment: gpuCluster }\n    extendedResources: true\n",
                    ),
                ],
            ),
            vec![],
        ),
        ("GPU159", taints(), vec![]),
        ("GPU159", d(), vec![]),
    ]
}

/// The standalone base: the MIG shape only the A100 pool (still on the device plugin) has warns
/// (GPU169); nothing else. With the A100 pool moved too it is clean.
#[test]
fn the_standalone_base_is_clean() {
    let r = run(&sa());
    assert_eq!(rules(&r), vec!["GPU169"], "{:#?}", r.findings);
    assert!(r.findings[0].message.contains("`mig-1g`"));
    let r = run(&edit(&sa(), &[A100_TO_DRA]));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

#[test]
fn the_dra_base_is_clean() {
    let r = run(DRA_BASE);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert!(rules(&r).is_empty());
}

/// A hostile GPU count must not size the per-GPU layouts GPU172 builds (it did: a 128 GiB
/// allocation found by the hostile corpus): GPU018 reports the count, GPU172 says why the pool
/// cannot hold the shape, and nothing is allocated by it.
#[test]
fn a_hostile_gpu_count_is_reported_not_allocated() {
    let text = edit(
        DRA_BASE,
        &[(
            "gpu: { model: A100-SXM4-80GB, count: 4 }",
            "gpu: { model: A100-SXM4-80GB, count: 4294967295 }",
        )],
    );
    let r = run(&text);
    let found = rules(&r);
    assert!(found.contains(&"GPU018"), "{found:?}");
    assert!(
        r.findings
            .iter()
            .any(|f| f.rule == "GPU172" && f.message.contains("beyond the")),
        "{:#?}",
        r.findings
    );
}

/// The base with a shape of alternatives (`any`: eight H100s, else one) claimed twice by the tenant.
fn alternatives() -> String {
    edit(
        DRA_BASE,
        &[
            (
                "      - name: mig-1g\n",
                "      - name: any\n        firstAvailable: [h100x8, h100]\n      - name: mig-1g\n",
            ),
            (
                "claims: { h100: 8, mig-1g: 14 }",
                "claims: { h100: 8, mig-1g: 14, any: 2 }",
            ),
        ],
    )
}

/// The base on Kubernetes 1.36 with a 20Gi share of an H100 (`slice`), not claimed.
fn shares() -> String {
    edit(
        DRA_BASE,
        &[
            ("version: \"1.35.1\"", "version: \"1.36.3\""),
            (
                "      - name: mig-1g\n",
                "      - name: slice\n        gpu: { model: H100-SXM5-80GB }\n        memoryShare: 20Gi\n      - name: mig-1g\n",
            ),
        ],
    )
}

/// `kueue_claims` with a shape of alternatives (`any`) in place of the H100 claim.
fn kueue_alternatives(base: &str) -> String {
    edit(
        base,
        &[
            (
                "  tenants:\n",
                "  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}, {name: h100x2, gpu: {model: H100-SXM5-80GB}, count: 2}, {name: any, firstAvailable: [h100x2, h100]}]\n  tenants:\n",
            ),
            (
                "      cuda: [\"12.4\"]\n",
                "      cuda: [\"12.4\"]\n      claims: { any: 4 }\n",
            ),
        ],
    )
}

/// Failing cases of the shapes beyond one kind of whole device (GPU1500-GPU1502).
pub(super) fn shape_cases() -> Vec<Case> {
    let nine: &'static str =
        "firstAvailable: [h100x8, h100, mig-1g, h100x8, h100, mig-1g, h100x8, h100, mig-1g]";
    vec![
        (
            "GPU1500",
            alternatives(),
            vec![("[h100x8, h100]", "[h100x8, h10]")],
        ),
        (
            "GPU1500",
            alternatives(),
            vec![("[h100x8, h100]", "[h100x8, any]")],
        ),
        (
            "GPU1500",
            alternatives(),
            vec![("[h100x8, h100]", "[h100x8, h100x8]")],
        ),
        (
            "GPU1500",
            alternatives(),
            vec![("firstAvailable: [h100x8, h100]", nine)],
        ),
        (
            "GPU1500",
            alternatives(),
            vec![(
                "[h100x8, h100]\n",
                "[h100x8, h100]\n        gpu: {}\n        count: 2\n",
            )],
        ),
        // A shape of alternatives naming another one.
        (
            "GPU1500",
            alternatives(),
            vec![(
                "      - name: mig-1g\n",
                "      - name: any2\n        firstAvailable: [any, h100]\n      - name: mig-1g\n",
            )],
        ),
        // Kueue v0.19.2 leaves a firstAvailable claim inadmissible.
        ("GPU1500", kueue_alternatives(KUEUE_BASE), vec![]),
        (
            "GPU1501",
            shares(),
            vec![("version: \"1.36.3\"", "version: \"1.35.1\"")],
        ),
        (
            "GPU1501",
            shares(),
            vec![("memoryShare: 20Gi", "memoryShare: 96Gi")],
        ),
        (
            "GPU1501",
            shares(),
            vec![("memoryShare: 20Gi", "memoryShare: \"0\"")],
        ),
        (
            "GPU1501",
            shares(),
            vec![("memoryShare: 20Gi", "memoryShare: lots")],
        ),
        (
            "GPU1501",
            shares(),
            vec![(
                "mig: { profile: 1g.10gb }",
                "mig: { profile: 1g.10gb }\n        memoryShare: 5Gi",
            )],
        ),
        (
            "GPU1502",
            shares(),
            vec![(
                "claims: { h100: 8, mig-1g: 14 }",
                "claims: { h100: 8, mig-1g: 14, slice: 4 }",
            )],
        ),
        // Volcano v1.15.1 does not charge firstAvailable claims to the queue.
        (
            "GPU1502",
            kueue_alternatives(&super::volcano_base()),
            vec![],
        ),
    ]
}

/// Passing cases next to [`shape_cases`].
pub(super) fn shape_passing_cases() -> Vec<Case> {
    vec![
        ("GPU1500", alternatives(), vec![]),
        ("GPU171", alternatives(), vec![]),
        ("GPU172", alternatives(), vec![]),
        ("GPU173", alternatives(), vec![]),
        // Declared but claimed through no Kueue queue.
        (
            "GPU1500",
            kueue_alternatives(KUEUE_BASE),
            vec![(
                "      claims: { any: 4 }\n",
                "      claims: { h100x2: 4 }\n",
            )],
        ),
        ("GPU1501", shares(), vec![]),
        (
            "GPU1501",
            shares(),
            vec![("memoryShare: 20Gi", "memoryShare: 80G")],
        ),
        ("GPU1502", shares(), vec![]),
        ("GPU1502", alternatives(), vec![]),
    ]
}

/// Under DynamicMIG a MIG shape is served by pools without a pre-created layout (partitionable
/// devices: the driver makes the instance on allocation); without it the same shape is GPU172.
#[test]
fn dynamic_mig_pools_hold_mig_shapes_without_a_layout() {
    let base = edit(
        DRA_BASE,
        &[
            ("version: \"1.35.1\"", "version: \"1.36.3\""),
            ("mig: { profile: 1g.10gb }", "mig: { profile: 3g.40gb }"),
            (
                "claims: { h100: 8, mig-1g: 14 }",
                "claims: { h100: 8, mig-1g: 2 }",
            ),
        ],
    );
    let without = run(&edit(
        &base,
        &[(
            "  dra:\n    shapes:\n",
            "  dra:\n    driver: { deployment: gpuCluster }\n    shapes:\n",
        )],
    ));
    assert!(
        without
            .findings
            .iter()
            .any(|f| f.rule == "GPU172" && f.message.contains("`3g.40gb`")),
        "{:#?}",
        without.findings
    );
    let with = run(&edit(
        &base,
        &[(
            "  dra:\n    shapes:\n",
            "  dra:\n    driver: { deployment: gpuCluster, featureGates: { DynamicMIG: true } }\n    shapes:\n",
        )],
    ));
    assert!(!rules(&with).contains(&"GPU172"), "{:#?}", with.findings);
}

/// The tokens an edit wrote that the text it replaced did not have (`1.33.5` of
/// `version: "1.33.5"` over `version: "1.35.1"`): the values the user wrote.
fn written(edits: &[(&str, &str)]) -> Vec<String> {
    let split = |s: &str| -> Vec<String> {
        s.split(|c: char| {
            c.is_whitespace() || matches!(c, '{' | '}' | '[' | ']' | ',' | ':' | '"' | '\'')
        })
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
    };
    let mut out = Vec::new();
    for (from, to) in edits {
        let old = split(from);
        for t in split(to) {
            if !old.contains(&t) && !out.contains(&t) {
                out.push(t);
            }
        }
    }
    // An edit that only removes or repeats (`[h100x8, h100x8]`): what is left where it was.
    if out.is_empty() {
        out = edits.iter().flat_map(|(_, to)| split(to)).collect();
    }
    out
}

/// Every DRA rule's finding names the field at fault and a value the case wrote there, not only
/// the limit it broke (issue 39, Deliver 6): the message contains one of the tokens the edit
/// wrote, and the finding's path is a field of the blueprint.
#[test]
fn dra_findings_name_the_field_and_the_value_written() {
    let dra_rules =
        |r: &str| crate::validate::registry::rule(r).is_some_and(|rule| rule.area == "dra");
    let mut failures = Vec::new();
    for (rule, base, edits) in cases().into_iter().chain(shape_cases()) {
        let tokens = written(&edits);
        // A case built into its base, or an edit that only deletes: nothing was written.
        if !dra_rules(rule) || tokens.is_empty() {
            continue;
        }
        let report = run(&edit(&base, &edits));
        let Some(f) = report
            .findings
            .iter()
            .find(|f| f.rule == rule && tokens.iter().any(|t| f.message.contains(t.as_str())))
        else {
            failures.push(format!(
                "{rule}: no finding names one of {tokens:?}: {:?}",
                report
                    .findings
                    .iter()
                    .filter(|f| f.rule == rule)
                    .map(|f| (&f.path, &f.message))
                    .collect::<Vec<_>>()
            ));
            continue;
        };
        if !f.path.starts_with("spec.") {
            failures.push(format!(
                "{rule}: path `{}` is not a blueprint field",
                f.path
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
