//! Table tests: for every rule, a blueprint that passes it and one that fails it.
//! Each case edits a valid base blueprint by replacing one exact snippet, so a case that no longer
//! applies (the snippet vanished from the base) fails loudly instead of passing vacuously.

use jiff::civil::date;

mod dra;
mod network;
mod provisioning;

use super::Options;
use gpuctl_model::located::{FileReport, Severity};
use gpuctl_model::profiles::Catalog;

const KUEUE_BASE: &str = r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: base
spec:
  kubernetes:
    version: "1.34.2"
  gpuOperator:
    version: v26.7.0
    driver:
      version: "595.91.07"
      kernelModuleType: auto
    dcgmExporter: { enabled: true, interval: 30s }
  nodePools:
    - name: train
      role: training
      selector: { gpuctl.dev/pool: train }
      nodes: 4
      gpu: { model: H100-SXM5-80GB, count: 8 }
      labels: { gpu.example.com/tier: premium }
      taints:
        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }
    - name: infer
      role: inference
      selector: { gpuctl.dev/pool: infer }
      nodes: 2
      gpu: { model: A100-SXM4-80GB, count: 8 }
      partitioning:
        mode: mig
        mig:
          strategy: mixed
          layout: { "3g.40gb": 2 }
    - name: dev
      role: development
      selector: { gpuctl.dev/pool: dev }
      nodes: 2
      gpu: { model: L4, count: 4 }
      partitioning:
        mode: time-slicing
        timeSlicing: { replicas: 4 }
  priorityClasses:
    - name: high
      value: 1000000
    - name: low
      value: 100
      preemptionPolicy: Never
      globalDefault: true
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      cohorts:
        - { name: all }
        - { name: sub, parent: all }
      clusterQueues:
        - name: cq-train
          cohort: all
          resources:
            - pool: train
              quota: { nvidia.com/gpu: 8, cpu: "32", memory: 1Ti }
              borrowingLimit: { nvidia.com/gpu: 8 }
              lendingLimit: { nvidia.com/gpu: 8 }
        - name: cq-burst
          cohort: all
          resources:
            - pool: train
              quota: { nvidia.com/gpu: 24, cpu: "32", memory: 1Ti }
        - name: cq-infer
          cohort: sub
          resources:
            - pool: infer
              quota: { nvidia.com/mig-3g.40gb: 8, cpu: "64", memory: 512Gi }
        - name: cq-dev
          resources:
            - pool: dev
              quota: { nvidia.com/gpu: 32, cpu: "32", memory: 256Gi }
  tenants:
    - name: team-a
      namespaces: [team-a]
      priorityClass: high
      queue: cq-train
      quota: { nvidia.com/gpu: 16, pods: 50, requests.cpu: "64" }
      defaults: { nvidia.com/gpu: 1, cpu: "1" }
      cuda: ["12.4"]
    - name: serving
      namespaces: [serve-a, serve-b]
      priorityClass: high
      queue: cq-infer
      quota: { nvidia.com/mig-3g.40gb: 8 }
      cuda: ["12.8"]
    - name: dev
      namespaces: [dev]
      priorityClass: low
      queue: cq-dev
      quota: { nvidia.com/gpu: 32 }
  monitoring:
    serviceMonitor: true
    alerts: { xid: true, eccErrors: true, temperatureC: 85 }
  upgrades:
    strategy: blue-green
    blueGreen: { batch: "25%", drainTimeout: 30m }
"#;

const VOLCANO_SCHED: &str = r#"  scheduling:
    queueing: volcano
    volcano:
      version: v1.15.1
      queues:
        - { name: parent, parent: root, weight: 4, capability: { nvidia.com/gpu: 32 }, deserved: { nvidia.com/gpu: 24 }, guarantee: { nvidia.com/gpu: 12 } }
        - { name: cq-train, parent: parent, weight: 2, capability: { nvidia.com/gpu: 32 }, deserved: { nvidia.com/gpu: 16 }, guarantee: { nvidia.com/gpu: 8 } }
        - { name: cq-infer, parent: root, weight: 2 }
        - { name: cq-dev, parent: root, weight: 1 }
"#;

/// The training pool's GPU line, and the same with an `os` added (GPU037/GPU038 cases).
const TRAIN_GPU: &str = "      gpu: { model: H100-SXM5-80GB, count: 8 }\n";
const TRAIN_OS_WINDOWS: &str = "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: windows, version: \"2022\" }\n";
/// Ubuntu 20.04: listed up to 25.10, not on the 26.x pages.
const TRAIN_OS_FOCAL: &str = "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: ubuntu, version: \"20.04\", kernel: \"5.15.0-1055-aws\" }\n";
/// Ubuntu 22.04 with the 6.2 HWE kernel, which no page lists.
const TRAIN_OS_HWE_KERNEL: &str = "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: ubuntu, version: \"22.04\", kernel: \"6.2.0-39-generic\" }\n";
const TRAIN_OS_JAMMY_68: &str = "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: ubuntu, version: \"22.04\", kernel: \"6.8.0-1015-aws\" }\n";
const TRAIN_OS_NOBLE: &str = "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: ubuntu, version: \"24.04\", kernel: \"6.8.0-1015-nvidia\" }\n";
/// Ubuntu 24.04 with a 6.11 kernel: no precompiled container for it.
const TRAIN_OS_NOBLE_611: &str = "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: ubuntu, version: \"24.04\", kernel: \"6.11.0-1008-aws\" }\n";
const TRAIN_OS_RHCOS: &str =
    "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: rhcos, version: \"4.20\" }\n";
/// Where the accounting cases insert `spec.accounting` into the base.
const ACC_AT: &str = "  upgrades:\n";
const KMT_AUTO: &str = "      kernelModuleType: auto\n";

fn volcano_base() -> String {
    let start = KUEUE_BASE.find("  scheduling:\n").unwrap();
    let end = KUEUE_BASE.find("  tenants:\n").unwrap();
    format!(
        "{}{}{}",
        &KUEUE_BASE[..start],
        VOLCANO_SCHED,
        &KUEUE_BASE[end..]
    )
}

fn run(text: &str) -> FileReport {
    super::check_bytes(
        "test.yaml",
        text.as_bytes().to_vec(),
        Catalog::embedded(),
        Options {
            today: date(2026, 11, 30),
        },
    )
}

fn edit(base: &str, edits: &[(&str, &str)]) -> String {
    let mut text = base.to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "snippet not in base: {from:?}");
        text = text.replacen(from, to, 1);
    }
    text
}

fn rules(report: &FileReport) -> Vec<&'static str> {
    report.findings.iter().map(|f| f.rule).collect()
}

#[test]
fn bases_are_clean() {
    for base in [
        KUEUE_BASE.to_string(),
        volcano_base(),
        provisioning::prov_base(),
    ] {
        let r = run(&base);
        assert!(r.findings.is_empty(), "{:#?}", r.findings);
    }
}

/// (rule, base, edits): the edits make the base fail exactly this rule (possibly among others).
/// (rule, base text, edits).
type Case = (&'static str, String, Vec<(&'static str, &'static str)>);

fn cases() -> Vec<Case> {
    let mut all = base_cases();
    all.extend(network::cases());
    all.extend(dra::cases());
    all.extend(dra::shape_cases());
    all.extend(provisioning::cases());
    all
}

fn base_cases() -> Vec<Case> {
    let k = KUEUE_BASE.to_string();
    let v = volcano_base();
    vec![
        (
            "GPU001",
            k.clone(),
            vec![("  name: base\n", "  name: base\n  name: again\n")],
        ),
        (
            "GPU001",
            k.clone(),
            vec![("kind: ClusterBlueprint\n", "kind: [ClusterBlueprint\n")],
        ),
        (
            "GPU002",
            k.clone(),
            vec![("      nodes: 4\n", "      nodes: 4\n      gpus: 8\n")],
        ),
        (
            "GPU003",
            k.clone(),
            vec![("version: \"1.34.2\"", "version: 1.30")],
        ),
        (
            "GPU003",
            k.clone(),
            vec![("role: training", "role: trainng")],
        ),
        ("GPU004", k.clone(), vec![("      nodes: 4\n", "")]),
        (
            "GPU005",
            k.clone(),
            vec![("gpuctl.dev/v1alpha1", "gpuctl.dev/v1")],
        ),
        // Issue 26: a tenant without namespaces renders nothing, its quota and queue included.
        (
            "GPU009",
            k.clone(),
            vec![("namespaces: [dev]", "namespaces: []")],
        ),
        (
            "GPU010",
            k.clone(),
            vec![("name: team-a\n", "name: Team_A\n")],
        ),
        // Issue 10: hostile values that loaded, validated and then failed or escaped later.
        (
            "GPU010",
            k.clone(),
            vec![(
                "    version: v26.7.0\n",
                "    version: v26.7.0\n    namespace: \"/../../tmp/x/ESCAPED\"\n",
            )],
        ),
        (
            "GPU011",
            k.clone(),
            vec![(
                "      namespaces: [dev]\n",
                "      namespaces: [gpu-operator]\n",
            )],
        ),
        (
            "GPU011",
            k.clone(),
            vec![(
                "        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }\n",
                "        - { key: nvidia.com/gpu, value: present, effect: NoSchedule }\n        - { key: nvidia.com/gpu, value: other, effect: NoSchedule }\n",
            )],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: latest")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: .nan")],
        ),
        (
            "GPU018",
            k.clone(),
            vec![(
                "count: 8 }\n      labels",
                "count: 4294967295 }\n      labels",
            )],
        ),
        (
            "GPU018",
            k.clone(),
            vec![("      nodes: 4\n", "      nodes: 5001\n")],
        ),
        (
            "GPU018",
            k.clone(),
            vec![(
                "timeSlicing: { replicas: 4 }",
                "timeSlicing: { replicas: 4294967295 }",
            )],
        ),
        (
            "GPU019",
            k.clone(),
            vec![(
                "    dcgmExporter: { enabled: true, interval: 30s }\n",
                "    dcgmExporter: { enabled: true, interval: 30s }\n    values: { drivr: { enabled: false } }\n",
            )],
        ),
        (
            "GPU051",
            k.clone(),
            vec![("pods: 50, requests.cpu", "pods: -1, requests.cpu")],
        ),
        (
            "GPU051",
            k.clone(),
            vec![(
                "borrowingLimit: { nvidia.com/gpu: 8 }",
                "borrowingLimit: { cpu: -10 }",
            )],
        ),
        (
            "GPU070",
            k.clone(),
            vec![(
                "- { name: all }",
                "- { name: all, fairSharingWeight: \"x\" }",
            )],
        ),
        (
            "GPU070",
            k.clone(),
            vec![("- { name: all }", "- { name: all, fairSharingWeight: -80 }")],
        ),
        ("GPU003", k.clone(), vec![("  name: base\n", "  - base\n")]),
        (
            "GPU056",
            k.clone(),
            vec![(
                "defaults: { nvidia.com/gpu: 1,",
                "defaults: { n4idia.com/gpu: 1,",
            )],
        ),
        (
            "GPU056",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32 }",
                "quota: { nvidia.com/gpus: 32 }",
            )],
        ),
        (
            "GPU003",
            k.clone(),
            vec![("gpu: { model: L4, count: 4 }", "gpu: [L4, 4]")],
        ),
        (
            "GPU001",
            k.clone(),
            vec![("  name: base\n", "  name: !!python/object base\n")],
        ),
        (
            "GPU001",
            k.clone(),
            vec![("nodes: 4\n", "nodes: !!bool 16\n")],
        ),
        (
            "GPU001",
            k.clone(),
            vec![(
                "apiVersion: gpuctl.dev/v1alpha1\n",
                "%YAML 9.9\n---\napiVersion: gpuctl.dev/v1alpha1\n",
            )],
        ),
        (
            "GPU001",
            k.clone(),
            vec![(
                "  labels: { gpu.example.com/tier: premium }",
                "  labels: { 5: premium }",
            )],
        ),
        (
            "GPU011",
            k.clone(),
            vec![("namespaces: [dev]", "namespaces: [team-a]")],
        ),
        (
            "GPU011",
            k.clone(),
            vec![("    - name: low\n", "    - name: high\n")],
        ),
        (
            "GPU012",
            k.clone(),
            vec![("queue: cq-dev", "queue: cq-dve")],
        ),
        (
            "GPU012",
            k.clone(),
            vec![("priorityClass: low", "priorityClass: lowest")],
        ),
        (
            "GPU012",
            k.clone(),
            vec![("- pool: dev\n", "- pool: devv\n")],
        ),
        (
            "GPU013",
            k.clone(),
            vec![("selector: { gpuctl.dev/pool: dev }", "selector: {}")],
        ),
        (
            "GPU013",
            k.clone(),
            vec![(
                "selector: { gpuctl.dev/pool: dev }",
                "selector: { gpuctl.dev/pool: infer, zone: a }",
            )],
        ),
        (
            "GPU014",
            k.clone(),
            vec![(
                "labels: { gpu.example.com/tier: premium }",
                "labels: { nvidia.com/gpu.product: H100 }",
            )],
        ),
        (
            "GPU014",
            k.clone(),
            vec![(
                "labels: { gpu.example.com/tier: premium }",
                "labels: { gpu.example.com/tier: \"not valid!\" }",
            )],
        ),
        ("GPU015", k.clone(), vec![("model: L4,", "model: L4-24GB,")]),
        (
            "GPU016",
            k.clone(),
            vec![("queueing: kueue", "queueing: volcano")],
        ),
        (
            "GPU017",
            k.clone(),
            vec![
                (
                    "    - name: train\n",
                    "    - name: h100-sxm5-80gb-training-pool-for-the-foundation-team\n",
                ),
                (
                    "gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                    "gpu: { model: H100-SXM5-80GB, count: 8 }\n      driver: { version: \"595.91.07\" }\n",
                ),
                (
                    "- pool: train\n",
                    "- pool: h100-sxm5-80gb-training-pool-for-the-foundation-team\n",
                ),
            ],
        ),
        (
            "GPU020",
            k.clone(),
            vec![("version: \"595.91.07\"", "version: \"999.1.1\"")],
        ),
        (
            "GPU020",
            k.clone(),
            vec![("version: \"595.91.07\"", "version: \"595.x\"")],
        ),
        (
            "GPU021",
            k.clone(),
            vec![("cuda: [\"12.4\"]", "cuda: [\"13.9\"]")],
        ),
        (
            "GPU022",
            k.clone(),
            vec![
                ("version: \"595.91.07\"", "version: \"535.309.01\""),
                ("kernelModuleType: auto", "kernelModuleType: open"),
            ],
        ),
        (
            "GPU023",
            k.clone(),
            vec![("model: L4,", "model: V100-SXM2-32GB,")],
        ),
        (
            "GPU024",
            k.clone(),
            vec![
                ("model: L4,", "model: B200,"),
                ("kernelModuleType: auto", "kernelModuleType: proprietary"),
            ],
        ),
        (
            "GPU025",
            k.clone(),
            vec![
                ("model: A100-SXM4-80GB", "model: H100-SXM5-80GB"),
                (
                    "      partitioning:\n        mode: mig\n",
                    "      driver: { version: \"520.61.05\" }\n      partitioning:\n        mode: mig\n",
                ),
            ],
        ),
        (
            "GPU026",
            k.clone(),
            vec![("version: \"595.91.07\"", "version: \"570.211.01\"")],
        ),
        (
            "GPU027",
            k.clone(),
            vec![("version: \"1.34.2\"", "version: \"1.25.4\"")],
        ),
        (
            "GPU027",
            k.clone(),
            vec![("version: v26.7.0", "version: v19.1.0")],
        ),
        (
            "GPU028",
            k.clone(),
            vec![("version: \"595.91.07\"", "version: \"580.105.08\"")],
        ),
        (
            "GPU029",
            k.clone(),
            vec![("model: L4,", "model: RTX-4090,")],
        ),
        (
            "GPU030",
            k.clone(),
            vec![("model: A100-SXM4-80GB", "model: L40S")],
        ),
        (
            "GPU036",
            k.clone(),
            vec![
                ("version: v26.7.0", "version: v25.3.4"),
                ("model: L4,", "model: B300,"),
            ],
        ),
        // Issue 26: a pool's OS is checked against the release's platform page.
        ("GPU037", k.clone(), vec![(TRAIN_GPU, TRAIN_OS_WINDOWS)]),
        ("GPU037", k.clone(), vec![(TRAIN_GPU, TRAIN_OS_FOCAL)]),
        ("GPU038", k.clone(), vec![(TRAIN_GPU, TRAIN_OS_HWE_KERNEL)]),
        (
            "GPU038",
            k.clone(),
            vec![
                (TRAIN_GPU, TRAIN_OS_NOBLE_611),
                (
                    KMT_AUTO,
                    "      kernelModuleType: auto\n      usePrecompiled: true\n",
                ),
            ],
        ),
        (
            "GPU031",
            k.clone(),
            vec![("layout: { \"3g.40gb\": 2 }", "layout: { \"3g.20gb\": 2 }")],
        ),
        (
            "GPU032",
            k.clone(),
            vec![("layout: { \"3g.40gb\": 2 }", "layout: { \"4g.40gb\": 2 }")],
        ),
        (
            "GPU032",
            k.clone(),
            vec![("layout: { \"3g.40gb\": 2 }", "layout: { \"1g.10gb\": 8 }")],
        ),
        (
            "GPU033",
            k.clone(),
            vec![
                ("strategy: mixed", "strategy: single"),
                (
                    "layout: { \"3g.40gb\": 2 }",
                    "layout: { \"3g.40gb\": 1, \"1g.10gb\": 2 }",
                ),
            ],
        ),
        (
            "GPU034",
            k.clone(),
            vec![(
                "          layout: { \"3g.40gb\": 2 }\n",
                "          layout: { \"3g.40gb\": 2 }\n          devices: [ { gpus: [0], layout: { \"7g.80gb\": 1 } } ]\n",
            )],
        ),
        (
            "GPU034",
            k.clone(),
            vec![(
                "          layout: { \"3g.40gb\": 2 }\n",
                "          devices: [ { gpus: [0, 9], layout: { \"7g.80gb\": 1 } } ]\n",
            )],
        ),
        (
            "GPU035",
            k.clone(),
            vec![(
                "mode: time-slicing\n        timeSlicing: { replicas: 4 }",
                "mode: mps\n        mps: { replicas: 4 }",
            )],
        ),
        (
            "GPU040",
            k.clone(),
            vec![(
                "timeSlicing: { replicas: 4 }",
                "timeSlicing: { replicas: 1 }",
            )],
        ),
        (
            "GPU041",
            k.clone(),
            vec![("role: development", "role: inference")],
        ),
        (
            "GPU042",
            k.clone(),
            vec![(
                "      nodes: 4\n",
                "      nodes: 4\n      partitioning: { mode: none, mps: { replicas: 2 } }\n",
            )],
        ),
        (
            "GPU050",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 16, pods: 50",
                "quota: { limits.nvidia.com/gpu: 16, pods: 50",
            )],
        ),
        ("GPU051", k.clone(), vec![("pods: 50", "pod: 50")]),
        (
            "GPU051",
            k.clone(),
            vec![("requests.cpu: \"64\"", "requests.cpu: 64 cores")],
        ),
        (
            "GPU052",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 16, pods",
                "quota: { nvidia.com/gpu: 0.5, pods",
            )],
        ),
        (
            "GPU053",
            k.clone(),
            vec![(
                "quota: { nvidia.com/mig-3g.40gb: 8 }",
                "quota: { nvidia.com/mig-1g.10gb: 8 }",
            )],
        ),
        (
            "GPU053",
            k.clone(),
            vec![(
                "quota: { nvidia.com/mig-3g.40gb: 8,",
                "quota: { nvidia.com/gpu: 8,",
            )],
        ),
        (
            "GPU054",
            k.clone(),
            vec![(
                "defaults: { nvidia.com/gpu: 1,",
                "defaults: { nvidia.com/gpu: 17,",
            )],
        ),
        (
            "GPU055",
            v.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32 }",
                "quota: { nvidia.com/gpu: 100 }",
            )],
        ),
        (
            "GPU055",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 24, cpu",
                "quota: { nvidia.com/gpu: 40, cpu",
            )],
        ),
        (
            "GPU060",
            k.clone(),
            vec![("value: 1000000\n", "value: 2000000000\n")],
        ),
        (
            "GPU061",
            k.clone(),
            vec![
                ("    - name: low\n", "    - name: system-low\n"),
                ("priorityClass: low", "priorityClass: system-low"),
            ],
        ),
        (
            "GPU062",
            k.clone(),
            vec![(
                "      value: 1000000\n",
                "      value: 1000000\n      globalDefault: true\n",
            )],
        ),
        (
            "GPU070",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }",
                "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }\n            - pool: train\n              quota: { nvidia.com/gpu: 1, cpu: \"1\" }",
            )],
        ),
        (
            "GPU071",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }",
                "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }\n              borrowingLimit: { nvidia.com/gpu: 4 }",
            )],
        ),
        (
            "GPU072",
            k.clone(),
            vec![(
                "lendingLimit: { nvidia.com/gpu: 8 }",
                "lendingLimit: { nvidia.com/gpu: 30 }",
            )],
        ),
        (
            "GPU072",
            k.clone(),
            vec![(
                "lendingLimit: { nvidia.com/gpu: 8 }",
                "lendingLimit: { ephemeral-storage: 1Gi }",
            )],
        ),
        (
            "GPU073",
            k.clone(),
            vec![("- { name: all }", "- { name: all, parent: sub }")],
        ),
        ("GPU074", k.clone(), vec![("      queue: cq-dev\n", "")]),
        (
            "GPU075",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 16, pods: 50",
                "quota: { nvidia.com/gpu: 16, nvidia.com/mig-3g.40gb: 2, pods: 50",
            )],
        ),
        // A queue that covers only GPUs: every pod also requests cpu and memory.
        (
            "GPU075",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }",
                "quota: { nvidia.com/gpu: 32 }",
            )],
        ),
        (
            "GPU075",
            k.clone(),
            vec![(
                "defaults: { nvidia.com/gpu: 1,",
                "defaults: { nvidia.com/gpu: 1, ephemeral-storage: 1Gi,",
            )],
        ),
        (
            "GPU075",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 16, pods: 50",
                "quota: { nvidia.com/gpu: 16, hugepages-2Mi: 1Gi, pods: 50",
            )],
        ),
        // Excluding only cpu still leaves memory uncovered.
        (
            "GPU075",
            k.clone(),
            vec![
                (
                    "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }",
                    "quota: { nvidia.com/gpu: 32 }",
                ),
                (
                    "version: v0.19.2\n",
                    "version: v0.19.2\n      config: { resources: { excludeResourcePrefixes: [cpu] } }\n",
                ),
            ],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: \"0.13\"")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: banana")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: v0.13.0")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: v0.14.6")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: v0.19.9")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: v0.12.0")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.17.0\n      config: { resources: { quotaCheckStrategy: IgnoreUndeclared } }\n",
            )],
        ),
        (
            "GPU076",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { resources: { quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [example.com/] } }\n",
            )],
        ),
        (
            "GPU084",
            v.clone(),
            vec![("version: v1.15.1", "version: latest")],
        ),
        (
            "GPU118",
            v.clone(),
            vec![(
                "version: v1.15.1\n",
                "version: v1.14.4\n      install: helm\n",
            )],
        ),
        (
            "GPU118",
            v.clone(),
            vec![(
                "version: v1.15.1\n",
                "version: v1.15.1\n      install: gitops\n      values: { scheduler_replicas: 2 }\n",
            )],
        ),
        (
            "GPU118",
            v.clone(),
            vec![(
                "version: v1.15.1\n",
                "version: v1.15.1\n      values: { custom: { scheduler_replicas: 2 } }\n",
            )],
        ),
        (
            "GPU084",
            v.clone(),
            vec![("version: v1.15.1", "version: v1.3.0")],
        ),
        (
            "GPU084",
            v.clone(),
            vec![("version: v1.15.1", "version: v1.15.9")],
        ),
        (
            "GPU080",
            v.clone(),
            vec![(
                "name: cq-dev, parent: root, weight: 1",
                "name: cq-dev, parent: root, weight: 70000",
            )],
        ),
        (
            "GPU081",
            v.clone(),
            vec![(
                "guarantee: { nvidia.com/gpu: 8 }",
                "guarantee: { nvidia.com/gpu: 20 }",
            )],
        ),
        (
            "GPU081",
            v.clone(),
            vec![
                (
                    "name: cq-train, parent: parent, weight: 2, capability: { nvidia.com/gpu: 32 }",
                    "name: cq-train, parent: parent, weight: 2, capability: { nvidia.com/gpu: 64 }",
                ),
                (
                    "deserved: { nvidia.com/gpu: 16 }",
                    "deserved: { nvidia.com/gpu: 16 }",
                ),
            ],
        ),
        (
            "GPU082",
            v.clone(),
            vec![(
                "name: parent, parent: root",
                "name: parent, parent: cq-train",
            )],
        ),
        (
            "GPU083",
            v.clone(),
            vec![("queue: cq-dev", "queue: parent")],
        ),
        // Issue 14: a guarantee with no deserved is refused by Volcano's webhook.
        (
            "GPU081",
            v.clone(),
            vec![(
                "deserved: { nvidia.com/gpu: 16 }, guarantee: { nvidia.com/gpu: 8 }",
                "guarantee: { nvidia.com/gpu: 8 }",
            )],
        ),
        // The nearest ancestor that caps the resource, not only the parent.
        (
            "GPU081",
            v.clone(),
            vec![
                (
                    "name: cq-train, parent: parent, weight: 2, capability: { nvidia.com/gpu: 32 }, deserved",
                    "name: cq-train, parent: parent, weight: 2, deserved",
                ),
                (
                    "        - { name: cq-infer, parent: root, weight: 2 }\n",
                    "        - { name: cq-infer, parent: root, weight: 2 }\n        - { name: leaf, parent: cq-train, weight: 1, capability: { nvidia.com/gpu: 33 } }\n",
                ),
            ],
        ),
        // A parent with only a capability: Volcano counts its deserved and guarantee as zero.
        (
            "GPU110",
            v.clone(),
            vec![(
                "capability: { nvidia.com/gpu: 32 }, deserved: { nvidia.com/gpu: 24 }, guarantee: { nvidia.com/gpu: 12 } }",
                "capability: { nvidia.com/gpu: 32 } }",
            )],
        ),
        // Two children deserve more than their parent.
        (
            "GPU110",
            v.clone(),
            vec![(
                "name: cq-infer, parent: root, weight: 2",
                "name: cq-infer, parent: parent, weight: 2, deserved: { nvidia.com/gpu: 9 }",
            )],
        ),
        // A resource the children list and the parent does not (cpu).
        (
            "GPU110",
            v.clone(),
            vec![(
                "deserved: { nvidia.com/gpu: 16 }, guarantee",
                "deserved: { nvidia.com/gpu: 16, cpu: \"4\" }, guarantee",
            )],
        ),
        (
            "GPU111",
            k.clone(),
            vec![(
                "        - name: cq-dev\n",
                "        - name: cq-dev\n          preemption: { reclaimWithinCohort: Never, borrowWithinCohort: LowerPriority }\n",
            )],
        ),
        // The queue admits 32 GPUs into a namespace whose quota allows 16.
        (
            "GPU112",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32 }",
                "quota: { nvidia.com/gpu: 16 }",
            )],
        ),
        // Borrowing takes what the queue admits over the quota (8 nominal + 16 borrowed > 16).
        (
            "GPU112",
            k.clone(),
            vec![(
                "borrowingLimit: { nvidia.com/gpu: 8 }",
                "borrowingLimit: { nvidia.com/gpu: 16 }",
            )],
        ),
        // cpu: no borrowing limit, so the queue can borrow all of the cohort's unused cpu.
        (
            "GPU112",
            k.clone(),
            vec![("requests.cpu: \"64\"", "requests.cpu: \"63\"")],
        ),
        // Issue 26: cq-dev (no cohort) admits 32 GPUs; a quota of 40 leaves 8 unreachable.
        (
            "GPU117",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32 }",
                "quota: { nvidia.com/gpu: 40 }",
            )],
        ),
        // cq-train admits 8 nominal + 8 borrowed (its borrowing limit): 24 is above it.
        (
            "GPU117",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 16, pods: 50",
                "quota: { requests.nvidia.com/gpu: 24, pods: 50",
            )],
        ),
        // No other queue of cq-infer's cohort tree has MIG quota to lend.
        (
            "GPU117",
            k.clone(),
            vec![(
                "quota: { nvidia.com/mig-3g.40gb: 8 }",
                "quota: { nvidia.com/mig-3g.40gb: 9 }",
            )],
        ),
        (
            "GPU113",
            k.clone(),
            vec![(
                "defaults: { nvidia.com/gpu: 1, cpu: \"1\" }",
                "defaults: { nvidia.com/gpu: 1 }",
            )],
        ),
        (
            "GPU113",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32 }",
                "quota: { nvidia.com/gpu: 32, limits.memory: 1Ti }",
            )],
        ),
        // Nobody else in the cohort tree has MIG quota on the pool: nothing to borrow.
        (
            "GPU114",
            k.clone(),
            vec![(
                "quota: { nvidia.com/mig-3g.40gb: 8, cpu: \"64\", memory: 512Gi }",
                "quota: { nvidia.com/mig-3g.40gb: 8, cpu: \"64\", memory: 512Gi }\n              borrowingLimit: { nvidia.com/mig-3g.40gb: 4 }",
            )],
        ),
        // ... and nobody to lend to.
        (
            "GPU114",
            k.clone(),
            vec![(
                "quota: { nvidia.com/mig-3g.40gb: 8, cpu: \"64\", memory: 512Gi }",
                "quota: { nvidia.com/mig-3g.40gb: 8, cpu: \"64\", memory: 512Gi }\n              lendingLimit: { nvidia.com/mig-3g.40gb: 4 }",
            )],
        ),
        (
            "GPU115",
            k.clone(),
            vec![("- { name: all }", "- { name: all, fairSharingWeight: 2 }")],
        ),
        (
            "GPU115",
            k.clone(),
            vec![(
                "        - name: cq-dev\n",
                "        - name: cq-dev\n          fairSharingWeight: 5\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { integrations: { frameworks: [batch/jobs] } }\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { integrations: { frameworks: [batch/job, batch/job] } }\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      excludeResourcePrefixes: [example.com/]\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      quotaCheckStrategy: IgnoreUndeclared\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { fairSharing: { preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare] } }\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { resources: { transformations: [{ input: nvidia.com/mig-3g.40gb, outputs: { example.com/gpu: 500m } }, { input: nvidia.com/mig-3g.40gb }] } }\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { resources: { transformations: [{ input: nvidia.com/mig-3g.40gb, outputs: { example.com/gpu: half } }] } }\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { waitForPodsReady: { timeout: soon } }\n",
            )],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.18.6\n      install: gitops\n",
            )],
        ),
        // A transformation charges its outputs: the queue must cover them.
        (
            "GPU075",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      config: { resources: { transformations: [{ input: nvidia.com/mig-3g.40gb, strategy: Replace, outputs: { example.com/gpu-equivalent: 500m } }] } }\n",
            )],
        ),
        (
            "GPU090",
            k.clone(),
            vec![("interval: 30s", "interval: 50ms")],
        ),
        (
            "GPU090",
            k.clone(),
            vec![("interval: 30s", "interval: soon")],
        ),
        (
            "GPU091",
            k.clone(),
            vec![("enabled: true, interval", "enabled: false, interval")],
        ),
        (
            "GPU197",
            k.clone(),
            vec![(
                ACC_AT,
                "  accounting:\n    prices: [{ pool: trian, perGpuHour: 2.5 }]\n  upgrades:\n",
            )],
        ),
        (
            "GPU197",
            k.clone(),
            vec![(
                ACC_AT,
                "  accounting:\n    currency: euro\n    prices: [{ pool: train, model: L4, perGpuHour: -1 }]\n  upgrades:\n",
            )],
        ),
        (
            "GPU197",
            k.clone(),
            vec![(
                ACC_AT,
                "  accounting:\n    weighting: table\n    weights: { 1g.10gb: 2 }\n    idle: { activityBelowPercent: 0, for: 10s }\n    costCentres: { nobody: \"\" }\n  upgrades:\n",
            )],
        ),
        (
            "GPU198",
            k.clone(),
            vec![
                ("enabled: true, interval", "enabled: false, interval"),
                (ACC_AT, "  accounting: {}\n  upgrades:\n"),
            ],
        ),
        (
            "GPU198",
            k.clone(),
            vec![(
                ACC_AT,
                "  accounting: { idle: { for: 45s } }\n  upgrades:\n",
            )],
        ),
        (
            "GPU197",
            k.clone(),
            vec![(
                ACC_AT,
                "  accounting: { idle: { for: 200h } }\n  upgrades:\n",
            )],
        ),
        // Above every GPU's shutdown temperature: never fires.
        (
            "GPU092",
            k.clone(),
            vec![("temperatureC: 85", "temperatureC: 1000")],
        ),
        // At or below the coolest inlet air: fires on every GPU.
        (
            "GPU092",
            k.clone(),
            vec![("temperatureC: 85", "temperatureC: 0")],
        ),
        (
            "GPU095",
            k.clone(),
            vec![("batch: \"25%\"", "batch: \"0%\"")],
        ),
        (
            "GPU095",
            k.clone(),
            vec![("drainTimeout: 30m", "drainTimeout: half an hour")],
        ),
        (
            "GPU100",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    chart: { path: ../../etc/shadow }\n",
            )],
        ),
        (
            "GPU100",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    chart: { path: /srv/charts/gpu-operator.tgz }\n",
            )],
        ),
        (
            "GPU100",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    chart: { path: c.tgz, oci: \"oci://r.example/c/gpu-operator\" }\n",
            )],
        ),
        (
            "GPU100",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    chart: { repository: helm.internal/nvidia }\n",
            )],
        ),
        (
            "GPU100",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    chart: { repository: \"https://user:pw@helm.internal/nvidia\" }\n",
            )],
        ),
        (
            "GPU100",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    chart: { oci: \"https://r.example/c\" }\n",
            )],
        ),
        (
            "GPU101",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    images: { registry: \"https://registry.internal\" }\n",
            )],
        ),
        (
            "GPU101",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    images: { registry: \"registry.internal/Mirror:v1\" }\n",
            )],
        ),
        (
            "GPU101",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    images: { registry: \"registry.internal:http\" }\n",
            )],
        ),
        (
            "GPU101",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    images: { registry: registry.internal, pullSecrets: [Pull_Secret] }\n",
            )],
        ),
        (
            "GPU101",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    images: { registry: registry.internal, pullSecrets: [a, a] }\n",
            )],
        ),
        (
            "GPU102",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    install: helm\n    images: { registry: registry.internal }\n",
            )],
        ),
        (
            "GPU102",
            k.clone(),
            vec![(
                OPERATOR,
                "    version: v26.7.0\n    install: gitops\n    chart: { path: c.tgz }\n",
            )],
        ),
        // Kueue's chart source follows the same rules as the operator's.
        (
            "GPU100",
            k.clone(),
            vec![(
                KUEUE,
                "      version: v0.19.2\n      install: helm\n      chart: { path: ../kueue.tgz }\n",
            )],
        ),
        (
            "GPU102",
            k.clone(),
            vec![(
                KUEUE,
                "      version: v0.19.2\n      chart: { path: kueue.tgz }\n",
            )],
        ),
    ]
}

/// The line of the base's Kueue version, where Kueue's install settings are inserted.
const KUEUE: &str = "      version: v0.19.2\n";

/// The line of the base's operator version, where chart and image settings are inserted.
const OPERATOR: &str = "    version: v26.7.0\n";

#[test]
fn chart_sources_and_image_mirrors_that_are_right_pass() {
    for insert in [
        "    install: helm\n    chart: { path: charts/gpu-operator-v26.7.0.tgz }\n    images: { registry: \"registry.internal:5000/nvidia-mirror\", pullSecrets: [mirror-pull, backup.pull] }\n",
        "    install: helm\n    chart: { path: ./gpu-operator }\n    images: { registry: registry.internal }\n",
        "    install: helm\n    chart: { oci: \"oci://registry.internal:5000/charts/gpu-operator\" }\n    images: { registry: localhost/mirror }\n",
        "    install: helm\n    chart: { repository: \"https://charts.internal.example.com/nvidia\" }\n",
        "    install: none\n    images: { registry: registry.internal/nvidia }\n",
    ] {
        let text = edit(KUEUE_BASE, &[(OPERATOR, &format!("{OPERATOR}{insert}"))]);
        let text = edit(
            &text,
            &[(
                KUEUE,
                "      version: v0.19.2\n      install: helm\n      chart: { path: charts/kueue-0.19.2.tgz }\n",
            )],
        );
        let r = run(&text);
        let got = rules(&r);
        assert!(
            !got.iter()
                .any(|r| ["GPU100", "GPU101", "GPU102"].contains(r)),
            "{insert}: {:#?}",
            r.findings
        );
    }
}

#[test]
fn every_rule_case_fires_its_rule() {
    let mut failures = Vec::new();
    for (rule, base, edits) in cases() {
        let report = run(&edit(&base, &edits));
        if !rules(&report).contains(&rule) {
            failures.push(format!(
                "{rule} did not fire for {edits:?}; got {:?}",
                report.findings
            ));
        }
        for f in &report.findings {
            assert!(f.pos.is_some(), "{rule}: finding without position: {f:?}");
            assert!(f.hint.is_some(), "{rule}: finding without hint: {f:?}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// (rule, base, edits): the edits keep the base free of this rule, close to its failing cases.
fn passing_cases() -> Vec<Case> {
    let mut all = base_passing_cases();
    all.extend(network::passing_cases());
    all.extend(dra::passing_cases());
    all.extend(dra::shape_passing_cases());
    all.extend(provisioning::passing_cases());
    all
}

fn base_passing_cases() -> Vec<Case> {
    let k = KUEUE_BASE.to_string();
    let v = volcano_base();
    let os_cases: Vec<Case> = vec![
        (
            "GPU197",
            k.clone(),
            vec![(
                ACC_AT,
                "  accounting:\n    currency: EUR\n    prices: [{ pool: train, perGpuHour: 2.5 }, { model: L4, perGpuHour: 0.7 }]\n    weighting: table\n    weights: { 3g.40gb: 0.5 }\n    idle: { activityBelowPercent: 5, for: 30m }\n    costCentres: { team-a: CC-4711 }\n  upgrades:\n",
            )],
        ),
        ("GPU037", k.clone(), vec![(TRAIN_GPU, TRAIN_OS_NOBLE)]),
        ("GPU037", k.clone(), vec![(TRAIN_GPU, TRAIN_OS_RHCOS)]),
        ("GPU038", k.clone(), vec![(TRAIN_GPU, TRAIN_OS_JAMMY_68)]),
        // Precompiled R595 containers exist for Ubuntu 24.04 kernel 6.8 on v26.7.0.
        (
            "GPU038",
            k.clone(),
            vec![
                (TRAIN_GPU, TRAIN_OS_NOBLE),
                (
                    KMT_AUTO,
                    "      kernelModuleType: auto\n      usePrecompiled: true\n",
                ),
            ],
        ),
        // The hosts carry the driver: the operator builds nothing against their kernel.
        (
            "GPU038",
            k.clone(),
            vec![(
                TRAIN_GPU,
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      os: { id: ubuntu, version: \"22.04\", kernel: \"6.2.0-39-generic\" }\n      operands: { driver: false }\n",
            )],
        ),
    ];
    let gpu_only = (
        "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }",
        "quota: { nvidia.com/gpu: 32 }",
    );
    let mut cases = os_cases;
    cases.extend(vec![
        ("GPU075", k.clone(), vec![]),
        // The blueprint says Kueue ignores cpu and memory.
        (
            "GPU075",
            k.clone(),
            vec![
                gpu_only,
                (
                    "version: v0.19.2\n",
                    "version: v0.19.2\n      config: { resources: { excludeResourcePrefixes: [cpu, memory] } }\n",
                ),
            ],
        ),
        // Kueue checks only what the queue covers.
        (
            "GPU075",
            k.clone(),
            vec![
                gpu_only,
                (
                    "version: v0.19.2\n",
                    "version: v0.19.2\n      config: { resources: { quotaCheckStrategy: IgnoreUndeclared } }\n",
                ),
            ],
        ),
        // Object counts and PVC storage are not pod requests.
        (
            "GPU075",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 16, pods: 50",
                "quota: { nvidia.com/gpu: 16, requests.storage: 1Ti, count/jobs.batch: 10, pods: 50",
            )],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: v0.15.0")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![("version: v0.19.2", "version: \"0.16.3\"")],
        ),
        (
            "GPU076",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.18.1\n      config: { resources: { quotaCheckStrategy: IgnoreUndeclared } }\n",
            )],
        ),
        (
            "GPU084",
            v.clone(),
            vec![("version: v1.15.1", "version: v1.14.2")],
        ),
        (
            "GPU118",
            v.clone(),
            vec![(
                "version: v1.15.1\n",
                "version: v1.15.1\n      install: helm\n      chart: { repository: https://charts.internal.example.com/volcano }\n      values: { basic: { image_registry: registry.internal.example:5000 }, custom: { scheduler_replicas: 2 } }\n",
            )],
        ),
        ("GPU118", v.clone(), vec![("version: v1.15.1\n", "version: v1.14.4\n      install: none\n")]),
        ("GPU081", v.clone(), vec![]),
        // Under Kueue the queue governs what the tenant gets: its nominal quota must fit the
        // pools, the tenant's quota need only be at least what the queue admits.
        (
            "GPU055",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32 }",
                "quota: { nvidia.com/gpu: 100 }",
            )],
        ),
        ("GPU110", v.clone(), vec![]),
        // Two children whose deserved adds up to exactly the parent's.
        (
            "GPU110",
            v.clone(),
            vec![(
                "name: cq-infer, parent: root, weight: 2",
                "name: cq-infer, parent: parent, weight: 2, deserved: { nvidia.com/gpu: 8 }",
            )],
        ),
        // `pods` is not part of Volcano's arithmetic.
        (
            "GPU110",
            v.clone(),
            vec![(
                "deserved: { nvidia.com/gpu: 16 }, guarantee",
                "deserved: { nvidia.com/gpu: 16, pods: 10 }, guarantee",
            )],
        ),
        (
            "GPU111",
            k.clone(),
            vec![(
                "        - name: cq-dev\n",
                "        - name: cq-dev\n          preemption: { reclaimWithinCohort: Never, borrowWithinCohort: Never }\n",
            )],
        ),
        (
            "GPU111",
            k.clone(),
            vec![(
                "        - name: cq-dev\n",
                "        - name: cq-dev\n          preemption: { reclaimWithinCohort: Any, borrowWithinCohort: LowerPriority }\n",
            )],
        ),
        ("GPU009", k.clone(), vec![]),
        // The quota equals what the queue admits (team-a: 8 nominal + 8 borrowed).
        ("GPU117", k.clone(), vec![]),
        // cpu is not a GPU resource: pods outside Kueue use it too, a larger quota can be meant.
        (
            "GPU117",
            k.clone(),
            vec![("requests.cpu: \"64\"", "requests.cpu: \"6400\"")],
        ),
        // Without borrowing limit, the queue admits what the whole cohort can lend (24 more).
        (
            "GPU117",
            k.clone(),
            vec![
                ("borrowingLimit: { nvidia.com/gpu: 8 }\n", ""),
                (
                    "quota: { nvidia.com/gpu: 16, pods: 50",
                    "quota: { nvidia.com/gpu: 32, pods: 50",
                ),
            ],
        ),
        ("GPU112", k.clone(), vec![]),
        // A zero borrowing limit: the queue admits its nominal quota only.
        (
            "GPU112",
            k.clone(),
            vec![
                (
                    "borrowingLimit: { nvidia.com/gpu: 8 }",
                    "borrowingLimit: { nvidia.com/gpu: 0 }",
                ),
                (
                    "quota: { nvidia.com/gpu: 16, pods: 50",
                    "quota: { nvidia.com/gpu: 8, pods: 50",
                ),
            ],
        ),
        // Kueue charges a transformed resource as its outputs: not compared with the quota.
        (
            "GPU112",
            k.clone(),
            vec![
                (
                    "quota: { nvidia.com/gpu: 32 }",
                    "quota: { nvidia.com/gpu: 16 }",
                ),
                (
                    "version: v0.19.2\n",
                    "version: v0.19.2\n      config: { resources: { transformations: [{ input: nvidia.com/gpu, outputs: { example.com/gpu-hours: 1 } }] } }\n",
                ),
            ],
        ),
        ("GPU113", k.clone(), vec![]),
        // Only cpu and memory quotas demand container values.
        (
            "GPU113",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 32 }",
                "quota: { nvidia.com/gpu: 32, requests.ephemeral-storage: 1Ti }",
            )],
        ),
        ("GPU114", k.clone(), vec![]),
        (
            "GPU114",
            k.clone(),
            vec![(
                "quota: { nvidia.com/mig-3g.40gb: 8, cpu: \"64\", memory: 512Gi }",
                "quota: { nvidia.com/mig-3g.40gb: 8, cpu: \"64\", memory: 512Gi }\n              borrowingLimit: { nvidia.com/mig-3g.40gb: 0 }",
            )],
        ),
        (
            "GPU115",
            k.clone(),
            vec![
                ("- { name: all }", "- { name: all, fairSharingWeight: 2 }"),
                (
                    "version: v0.19.2\n",
                    "version: v0.19.2\n      config: { fairSharing: {} }\n",
                ),
            ],
        ),
        (
            "GPU116",
            k.clone(),
            vec![(
                "version: v0.19.2\n",
                "version: v0.19.2\n      install: gitops\n      config:\n        fairSharing: { preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare] }\n        resources: { transformations: [{ input: nvidia.com/mig-3g.40gb, outputs: { nvidia.com/mig-3g.40gb: 1 } }] }\n        integrations: { frameworks: [batch/job, jobset.x-k8s.io/jobset] }\n        waitForPodsReady: { timeout: 5m, blockAdmission: true }\n",
            )],
        ),
    ]);
    cases
}

#[test]
fn passing_cases_stay_clean() {
    for (rule, base, edits) in passing_cases() {
        let report = run(&edit(&base, &edits));
        assert!(
            !rules(&report).contains(&rule),
            "{rule} fired for {edits:?}: {:#?}",
            report.findings
        );
    }
}

/// The finding names what to change and offers only settings that work for the case at hand.
#[test]
fn queue_findings_say_what_to_do() {
    let text = edit(
        KUEUE_BASE,
        &[(
            "quota: { nvidia.com/gpu: 32, cpu: \"32\", memory: 256Gi }",
            "quota: { nvidia.com/gpu: 32 }",
        )],
    );
    let r = run(&text);
    let f = r.findings.iter().find(|f| f.rule == "GPU075").unwrap();
    assert_eq!(f.path, "spec.tenants[2].queue");
    assert!(f.message.contains("`cpu` and `memory`"), "{}", f.message);
    assert!(
        f.message.contains("covers only nvidia.com/gpu"),
        "{}",
        f.message
    );
    assert!(
        f.hint
            .as_deref()
            .unwrap()
            .contains("excludeResourcePrefixes")
    );

    let r = run(&edit(
        KUEUE_BASE,
        &[("version: v0.19.2", "version: v0.13.0")],
    ));
    let f = r.findings.iter().find(|f| f.rule == "GPU076").unwrap();
    assert!(
        f.message.contains("kueue.x-k8s.io/v1beta1 only"),
        "{}",
        f.message
    );
    assert!(f.hint.as_deref().unwrap().contains("v0.15.0 or later"));

    let r = run(&edit(
        KUEUE_BASE,
        &[("version: v0.19.2", "version: banana")],
    ));
    let f = r.findings.iter().find(|f| f.rule == "GPU076").unwrap();
    assert_eq!(f.path, "spec.scheduling.kueue.version");
    assert!(
        f.hint
            .as_deref()
            .unwrap()
            .contains("v0.19.x (up to v0.19.3)")
    );
}

/// The `kernelModuleType` values a GPU024 hint offers (`use `kernelModuleType: a` (or `b`)`).
fn offered_kernel_modules(hint: &str) -> Vec<String> {
    ["proprietary", "open", "auto"]
        .into_iter()
        .filter(|v| {
            hint.contains(&format!("`kernelModuleType: {v}`")) || hint.contains(&format!("`{v}`"))
        })
        .map(str::to_string)
        .collect()
}

/// GPU024's hint offers only settings that the next run accepts for that GPU and driver: never
/// `open` for a Volta pool, never `auto` below the operator's minimum driver, never
/// `proprietary` where only open modules exist.
#[test]
fn kernel_module_hints_offer_only_valid_values() {
    let train = |model: &str, driver: &str, kmt: &str| {
        edit(
            KUEUE_BASE,
            &[
                (
                    "gpu: { model: H100-SXM5-80GB, count: 8 }",
                    &*format!("gpu: {{ model: {model}, count: 8 }}").leak(),
                ),
                (
                    "      version: \"595.91.07\"\n      kernelModuleType: auto",
                    &*format!("      version: \"{driver}\"\n      kernelModuleType: {kmt}").leak(),
                ),
            ],
        )
    };
    // (model, driver, kernelModuleType as written, what the hint must offer, what it must not)
    type HintCase<'a> = (&'a str, &'a str, &'a str, &'a [&'a str], &'a [&'a str]);
    let cases: &[HintCase<'_>] = &[
        (
            "V100-SXM2-32GB",
            "580.173.02",
            "open",
            &["proprietary", "auto"],
            &["open"],
        ),
        (
            "V100-SXM2-32GB",
            "535.309.01",
            "auto",
            &["proprietary"],
            &["open", "auto"],
        ),
        (
            "V100-SXM2-32GB",
            "535.309.01",
            "open",
            &["proprietary"],
            &["open", "auto"],
        ),
        (
            "H100-SXM5-80GB",
            "535.309.01",
            "auto",
            &["proprietary", "open"],
            &["auto"],
        ),
        (
            "B200",
            "580.173.02",
            "proprietary",
            &["open", "auto"],
            &["proprietary"],
        ),
    ];
    for (model, driver, kmt, want, never) in cases {
        let r = run(&train(model, driver, kmt));
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == "GPU024" && f.message.contains("pool `train`"))
            .unwrap_or_else(|| panic!("{model} {driver} {kmt}: no GPU024: {:#?}", r.findings));
        let hint = f.hint.as_deref().unwrap();
        let offered = offered_kernel_modules(hint);
        for w in *want {
            assert!(
                offered.iter().any(|o| o == w),
                "{model} {driver} {kmt}: {hint}"
            );
        }
        for n in *never {
            assert!(
                !offered.iter().any(|o| o == n),
                "{model} {driver} {kmt}: offers {n}: {hint}"
            );
        }
        // Each offered value passes GPU024 for this pool on the next run.
        for o in &offered {
            let r = run(&train(model, driver, o));
            let again: Vec<_> = r
                .findings
                .iter()
                .filter(|f| f.rule == "GPU024" && f.message.contains("pool `train`"))
                .collect();
            assert!(
                again.is_empty(),
                "{model} {driver}: offered `{o}` fails: {again:#?}"
            );
        }
    }
}

/// A GPU076 / GPU084 did-you-mean names a release that the next run accepts.
#[test]
fn release_suggestions_are_accepted_releases() {
    let cases = [
        (
            KUEUE_BASE.to_string(),
            "version: v0.19.2",
            "v0.19.9",
            "GPU076",
        ),
        (
            KUEUE_BASE.to_string(),
            "version: v0.19.2",
            "v0.12.0",
            "GPU076",
        ),
        (
            KUEUE_BASE.to_string(),
            "version: v0.19.2",
            "v0.20.1",
            "GPU076",
        ),
        (volcano_base(), "version: v1.15.1", "v1.16.0", "GPU084"),
        (volcano_base(), "version: v1.15.1", "v1.15.7", "GPU084"),
    ];
    for (base, from, bad, rule) in cases {
        let text = base.replacen(from, &format!("version: {bad}"), 1);
        let r = run(&text);
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == rule)
            .unwrap_or_else(|| panic!("{bad}: {:#?}", r.findings));
        let hint = f.hint.as_deref().unwrap();
        let suggested = hint
            .strip_prefix("did you mean `")
            .and_then(|h| h.split_once('`'))
            .map(|(v, _)| v)
            .unwrap_or_else(|| panic!("{bad}: no suggestion in {hint}"));
        let r = run(&base.replacen(from, &format!("version: {suggested}"), 1));
        assert!(
            !rules(&r).contains(&rule),
            "{bad} -> {suggested}: {:#?}",
            r.findings
        );
    }
}

/// GPU028's hint lists only drivers the operator release validates and the pool's GPUs run.
#[test]
fn operator_driver_hint_offers_drivers_the_pool_can_run() {
    let text = edit(
        KUEUE_BASE,
        &[
            (
                "gpu: { model: H100-SXM5-80GB, count: 8 }",
                "gpu: { model: V100-SXM2-32GB, count: 8 }",
            ),
            (
                "      nodes: 4\n      gpu: { model: V100",
                "      nodes: 4\n      driver: { version: \"580.95.05\", kernelModuleType: proprietary }\n      gpu: { model: V100",
            ),
        ],
    );
    let r = run(&text);
    let f = r
        .findings
        .iter()
        .find(|f| f.rule == "GPU028" && f.path.starts_with("spec.nodePools[0]"))
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    let hint = f.hint.as_deref().unwrap();
    // v26.7.0 validates 610, 595, 580 and 535 drivers; Volta ends with R580.
    assert!(
        hint.contains("580.173.02") && hint.contains("535.309.01"),
        "{hint}"
    );
    assert!(
        !hint.contains("610.57.04") && !hint.contains("595.91.07"),
        "{hint}"
    );
    assert!(hint.contains("`gpuctl profiles`"), "{hint}");
    let fixed = text.replace(
        "version: \"580.95.05\", kernelModuleType",
        "version: \"580.173.02\", kernelModuleType",
    );
    let r = run(&fixed);
    let bad: Vec<_> = r
        .findings
        .iter()
        .filter(|f| {
            f.path.starts_with("spec.nodePools[0]") && matches!(f.rule, "GPU023" | "GPU028")
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn every_registered_rule_has_a_failing_case() {
    let covered: std::collections::BTreeSet<&str> = cases()
        .iter()
        .map(|c| c.0)
        .chain(network::PATCHED_CATALOG_RULES.iter().copied())
        .chain(super::fields::OVERLAY_AND_FLEET.iter().copied())
        .collect();
    for r in super::registry::RULES {
        assert!(covered.contains(r.id), "{} has no failing case", r.id);
    }
}

#[test]
fn all_findings_are_reported_at_once() {
    let text = edit(
        KUEUE_BASE,
        &[
            ("      nodes: 4\n", "      nodes: 4\n      gpus: 8\n"),
            ("    - name: high\n", "    - name: high\n      valeu: 3\n"),
            ("role: development", "role: dev"),
        ],
    );
    let r = run(&text);
    let got = rules(&r);
    assert_eq!(
        got.iter().filter(|r| **r == "GPU002").count(),
        2,
        "{:#?}",
        r.findings
    );
    assert!(got.contains(&"GPU003"), "{:#?}", r.findings);
    let unknown = r
        .findings
        .iter()
        .find(|f| f.path.ends_with("gpus"))
        .unwrap();
    assert_eq!(unknown.hint.as_deref(), Some("did you mean `gpu`?"));
    assert_eq!(unknown.pos.unwrap().line, 19);
}

/// Issue 12: one run reports every structural problem (three missing required fields, an unknown
/// field, a version written as a number, a value outside an enum), each at its line:column, and
/// the rules still check the parts that loaded.
#[test]
fn every_structural_problem_and_the_rules_in_one_run() {
    let text = edit(
        KUEUE_BASE,
        &[
            // Missing required fields: a whole section, a nested version, a pool's selector.
            ("  kubernetes:\n    version: \"1.34.2\"\n", ""),
            ("    version: v26.7.0\n", ""),
            ("      selector: { gpuctl.dev/pool: infer }\n", ""),
            // An unknown field.
            ("      nodes: 4\n", "      nodes: 4\n      gpus: 8\n"),
            // A type error: a version YAML reads as a number.
            ("version: v0.19.2", "version: 0.19"),
            // A value outside an enum.
            ("role: development", "role: dev"),
            // And a semantic problem in a part that loads: a queue that does not exist.
            ("queue: cq-dev", "queue: cq-dve"),
        ],
    );
    let r = run(&text);
    let got: Vec<(&str, &str, String)> = r
        .findings
        .iter()
        .map(|f| {
            (
                f.rule,
                f.path.as_str(),
                f.pos.map(|p| p.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    // Missing fields are reported at the mapping that lacks them (`spec` starts at 6:3 once
    // `kubernetes` is gone, `gpuOperator` at 7:5), the others at their value.
    let want = [
        ("GPU004", "spec.kubernetes", "6:3"),
        ("GPU004", "spec.gpuOperator.version", "7:5"),
        ("GPU002", "spec.nodePools[0].gpus", "16:7"),
        ("GPU004", "spec.nodePools[1].selector", "21:7"),
        ("GPU003", "spec.nodePools[2].role", "31:13"),
        ("GPU003", "spec.scheduling.kueue.version", "48:16"),
        ("GPU012", "spec.tenants[2].queue", "91:14"),
    ];
    for (rule, path, pos) in want {
        assert!(
            got.iter().any(|g| g.0 == rule && g.1 == path && g.2 == pos),
            "{rule} at {path} {pos} missing from {got:#?}"
        );
    }
    assert_eq!(r.findings.len(), want.len(), "{got:#?}");
    let missing = r
        .findings
        .iter()
        .find(|f| f.path == "spec.kubernetes")
        .unwrap();
    let hint = missing.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("docs/blueprint-reference.md"), "{hint}");
    assert!(hint.contains("`spec.kubernetes`"), "{hint}");
}

#[test]
fn semantic_findings_are_collected_together() {
    let text = edit(
        KUEUE_BASE,
        &[
            ("queue: cq-dev", "queue: cq-dve"),
            ("interval: 30s", "interval: 50ms"),
            ("value: 1000000\n", "value: 2000000000\n"),
        ],
    );
    let got = rules(&run(&text));
    for want in ["GPU012", "GPU090", "GPU060"] {
        assert!(got.contains(&want), "{want} missing from {got:?}");
    }
}

#[test]
fn limits_extended_message_says_what_to_write() {
    let text = edit(
        KUEUE_BASE,
        &[(
            "quota: { nvidia.com/gpu: 16, pods: 50",
            "quota: { limits.nvidia.com/gpu: 16, pods: 50",
        )],
    );
    let r = run(&text);
    let f = r.findings.iter().find(|f| f.rule == "GPU050").unwrap();
    assert_eq!(f.severity, Severity::Error);
    assert!(f.message.contains("never enforced"), "{}", f.message);
    assert!(
        f.hint
            .as_deref()
            .unwrap()
            .contains("requests.nvidia.com/gpu")
    );
}

/// The pool `train` renamed to `len` characters, with its own driver, under `strategy`.
fn long_pool(len: usize, strategy: &str) -> String {
    let name = format!("t{}", "x".repeat(len - 1));
    let text = edit(
        KUEUE_BASE,
        &[
            ("    - name: train\n", "    - name: @\n"),
            (
                "gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "gpu: { model: H100-SXM5-80GB, count: 8 }\n      driver: { version: \"595.91.07\" }\n",
            ),
            ("- pool: train\n", "- pool: @\n"),
            ("- pool: train\n", "- pool: @\n"),
            ("strategy: blue-green", strategy),
        ],
    );
    text.replace('@', &name)
}

#[test]
fn driver_cr_names_fit_a_label_value() {
    // blue-green: `pool-` + name + `-595-91-07` is 15 characters more than the pool name.
    let r = run(&long_pool(48, "strategy: blue-green"));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let r = run(&long_pool(49, "strategy: blue-green"));
    assert_eq!(rules(&r), ["GPU017"], "{:#?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.path, "spec.nodePools[0].name");
    assert!(
        f.message.contains("-595-91-07` (64 characters)")
            && f.message.contains("gpuctl.dev/driver"),
        "{}",
        f.message
    );
    assert!(
        f.hint.as_deref().unwrap().contains("at most 48 characters"),
        "{:?}",
        f.hint
    );
    // rolling: `pool-` + name, whatever the version.
    let r = run(&long_pool(58, "strategy: rolling"));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let r = run(&long_pool(59, "strategy: rolling"));
    assert_eq!(rules(&r), ["GPU017"], "{:#?}", r.findings);
    assert!(
        r.findings[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("at most 58 characters"),
        "{:?}",
        r.findings[0].hint
    );
    // A pool on the cluster default CR gets no CR of its own: nothing to check.
    let text = edit(
        &long_pool(49, "strategy: blue-green"),
        &[("      driver: { version: \"595.91.07\" }\n", "")],
    );
    assert!(run(&text).findings.is_empty());
}

#[test]
fn hostile_input_never_panics() {
    let inputs: Vec<String> = vec![
        String::new(),
        "\0\u{1}\u{2}".into(),
        "[".repeat(100_000),
        "{a: ".repeat(5_000),
        "- ".repeat(10_000),
        "spec: &a [*a]".into(),
        // Cut inside a tenant's queue name: a dangling reference.
        KUEUE_BASE[..KUEUE_BASE.find("queue: cq-train").unwrap() + 9].to_string(),
        KUEUE_BASE[..KUEUE_BASE.len() / 3].to_string(),
        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nmetadata: 7\nspec: []\n".into(),
        format!("{KUEUE_BASE}\n  extra: {}", "x".repeat(100_000)),
    ];
    for i in inputs {
        let r = run(&i);
        assert!(!r.findings.is_empty(), "bad input produced no finding");
    }
    // Every truncation point of a real blueprint.
    for cut in (0..KUEUE_BASE.len()).step_by(7) {
        if KUEUE_BASE.is_char_boundary(cut) {
            let _ = run(&KUEUE_BASE[..cut]);
        }
    }
}

/// GPU036, one row per GPU whose first operator release the catalog records: the release before
/// it fails, the release itself passes. MIG rows put the GPU on the MIG pool.
#[test]
fn gpu036_operator_too_old_for_gpu_table() {
    // (operator, model, on the MIG pool with this layout, expect GPU036)
    let rows: &[(&str, &str, Option<&str>, bool)] = &[
        ("v24.9.2", "B200", None, true),
        ("v25.3.0", "B200", None, false),
        ("v24.9.2", "GB200", None, true),
        ("v25.3.0", "GB200", None, false),
        ("v25.3.4", "B300", None, true),
        ("v25.10.0", "B300", None, false),
        ("v25.3.4", "GB300", None, true),
        ("v25.10.0", "GB300", None, false),
        ("v25.10.1", "RTX-PRO-4500-BLACKWELL", None, true),
        ("v26.3.0", "RTX-PRO-4500-BLACKWELL", None, false),
        // MIG on the RTX PRO 6000 Blackwell only from v25.3.4; the GPU itself is not refused.
        (
            "v25.3.3",
            "RTX-PRO-6000-BLACKWELL",
            Some("{ \"2g.48gb\": 2 }"),
            true,
        ),
        (
            "v25.3.4",
            "RTX-PRO-6000-BLACKWELL",
            Some("{ \"2g.48gb\": 2 }"),
            false,
        ),
        ("v25.3.3", "RTX-PRO-6000-BLACKWELL", None, false),
        // GPUs every release of the catalog supports.
        ("v24.9.0", "H100-SXM5-80GB", None, false),
        ("v24.9.0", "GH200-144GB", Some("{ \"3g.72gb\": 2 }"), false),
    ];
    for (operator, model, mig, expect) in rows {
        let version = format!("version: {operator}");
        let text = match mig {
            None => edit(
                KUEUE_BASE,
                &[
                    ("version: v26.7.0", version.as_str()),
                    ("model: L4,", &format!("model: {model},")),
                ],
            ),
            Some(layout) => edit(
                KUEUE_BASE,
                &[
                    ("version: v26.7.0", version.as_str()),
                    ("model: A100-SXM4-80GB", &format!("model: {model}")),
                    ("layout: { \"3g.40gb\": 2 }", &format!("layout: {layout}")),
                ],
            ),
        };
        let report = run(&text);
        let fired: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.rule == "GPU036")
            .collect();
        assert_eq!(
            !fired.is_empty(),
            *expect,
            "{operator} + {model} (mig {mig:?}): {:#?}",
            report.findings
        );
        for f in fired {
            assert_eq!(f.severity, Severity::Error);
            let hint = f.hint.as_deref().unwrap_or_default();
            assert!(hint.contains("or newer"), "{hint}");
            let path = if mig.is_some() {
                "spec.nodePools[1].partitioning.mode"
            } else {
                "spec.gpuOperator.version"
            };
            assert_eq!(f.path, path);
        }
    }
}

/// GPU029 fires on a consumer-GPU pool until the pool switches the operator's driver off, and its
/// hint names the field.
#[test]
fn gpu029_consumer_gpu_table() {
    let consumer = ("model: L4,", "model: RTX-4090,");
    // (operands line added to the pool, expect GPU029)
    let rows: &[(Option<&str>, bool)] = &[
        (None, true),
        (Some("operands: { driver: false }"), false),
        (Some("operands: { driver: true }"), true),
        (Some("operands: { dcgmExporter: false }"), true),
        (
            Some("operands: { driver: false, devicePlugin: true }"),
            false,
        ),
    ];
    for (operands, expect) in rows {
        let with = operands.map(|o| format!("gpu: {{ model: L4, count: 4 }}\n      {o}"));
        let mut edits = vec![];
        if let Some(w) = &with {
            edits.push(("gpu: { model: L4, count: 4 }", w.as_str()));
        }
        let text = edit(&edit(KUEUE_BASE, &edits), &[consumer]);
        let report = run(&text);
        let fired: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.rule == "GPU029")
            .collect();
        assert_eq!(
            !fired.is_empty(),
            *expect,
            "{operands:?}: {:#?}",
            report.findings
        );
        for f in fired {
            let hint = f.hint.as_deref().unwrap_or_default();
            assert!(
                hint.contains("spec.nodePools[2].operands: {driver: false}"),
                "{hint}"
            );
        }
        assert!(
            !rules(&report).iter().any(|r| r.starts_with("GPU00")),
            "operands must load: {:#?}",
            report.findings
        );
    }
}

/// An unknown operand is a GPU002 finding, not silently ignored.
#[test]
fn unknown_operand_is_reported() {
    let text = edit(
        KUEUE_BASE,
        &[(
            "gpu: { model: L4, count: 4 }",
            "gpu: { model: L4, count: 4 }\n      operands: { drivr: false }",
        )],
    );
    let report = run(&text);
    assert!(rules(&report).contains(&"GPU002"), "{:#?}", report.findings);
}

/// The field reference lists, per field, the rules that check it (validate/fields.rs). That list
/// must agree with the rules: every declared field is in the schema, every rule declares its
/// fields, and every finding of every table case is at (or under) a field its rule declares.
#[test]
fn rule_fields_match_what_the_rules_report() {
    use super::fields::{RULE_FIELDS, STRUCTURAL, covers};
    use gpuctl_model::blueprint::schema;
    let known: Vec<String> = schema::fields().into_iter().map(|f| f.path).collect();
    for (rule, fields) in RULE_FIELDS {
        assert!(
            super::registry::rule(rule).is_some(),
            "{rule} is not a rule"
        );
        for f in *fields {
            let base = f.strip_suffix("[]").unwrap_or(f);
            assert!(
                known.iter().any(|k| k == base),
                "{rule}: `{f}` is not a blueprint field"
            );
        }
    }
    for r in super::registry::RULES {
        assert!(
            STRUCTURAL.contains(&r.id)
                || super::fields::OVERLAY_AND_FLEET.contains(&r.id)
                || RULE_FIELDS.iter().any(|(id, _)| *id == r.id),
            "{} declares no fields in validate/fields.rs",
            r.id
        );
    }
    let mut undeclared = std::collections::BTreeSet::new();
    for (_, base, edits) in cases() {
        for f in run(&edit(&base, &edits)).findings {
            if STRUCTURAL.contains(&f.rule) {
                continue;
            }
            let declared = RULE_FIELDS
                .iter()
                .filter(|(id, _)| *id == f.rule)
                .flat_map(|(_, fields)| fields.iter());
            if !declared.clone().any(|d| covers(d, &f.path)) {
                undeclared.insert((f.rule, schema::field_path(&f.path)));
            }
        }
    }
    assert!(
        undeclared.is_empty(),
        "findings at fields their rule does not declare in validate/fields.rs: {undeclared:#?}"
    );
}

/// Every field of the schema, one at a time: a required one left out is reported missing (GPU004)
/// at its path, any field given a value of the wrong type is reported (GPU003) at its path, and
/// the rules run on the rest of the document without panicking on the stand-in values.
#[test]
fn every_field_missing_or_mistyped_is_reported_and_the_rest_is_checked() {
    use gpuctl_model::blueprint::schema;
    use serde_json::Value;
    let base = gpuctl_model::blueprint::yaml::SourceTree::parse(KUEUE_BASE)
        .expect("base parses")
        .value;
    // The first instance of a reference path (`[]` takes item 0) in `v`, as a loader path.
    fn locate(v: &Value, path: &str) -> Option<String> {
        let mut out = String::new();
        let mut cur = v;
        for part in path.split('.') {
            let (key, items) = match part.strip_suffix("[]") {
                Some(k) => (k, true),
                None => (part, false),
            };
            cur = cur.get(key)?;
            out = if out.is_empty() {
                key.to_string()
            } else {
                format!("{out}.{key}")
            };
            if items {
                cur = cur.get(0)?;
                out.push_str("[0]");
            }
        }
        Some(out)
    }
    fn edit_at(v: &mut Value, path: &str, with: Option<Value>) {
        let parts: Vec<&str> = path.split('.').collect();
        let mut cur = v;
        for (i, part) in parts.iter().enumerate() {
            let (key, index) = match part.split_once('[') {
                Some((k, _)) => (k, true),
                None => (*part, false),
            };
            if i == parts.len() - 1 && !index {
                let map = cur.as_object_mut().expect("a mapping");
                match &with {
                    Some(w) => {
                        map.insert(key.to_string(), w.clone());
                    }
                    None => {
                        map.shift_remove(key);
                    }
                }
                return;
            }
            cur = cur.get_mut(key).expect("path exists");
            if index {
                cur = cur.get_mut(0).expect("item 0");
            }
        }
    }
    let mut checked = 0;
    for f in schema::fields() {
        if matches!(f.path.as_str(), "apiVersion" | "kind") {
            continue;
        }
        let Some(at) = locate(&base, &f.path) else {
            continue;
        };
        checked += 1;
        // A value no field of the blueprint accepts: a list where a scalar or mapping is wanted,
        // a mapping where a list is wanted.
        let wrong = if f.ty.starts_with("list") {
            serde_json::json!({"not": "a list"})
        } else if f.ty == "any YAML value" {
            continue;
        } else {
            serde_json::json!([["not", "this"]])
        };
        let mut mistyped = base.clone();
        edit_at(&mut mistyped, &at, Some(wrong));
        let r = run(&serde_json::to_string_pretty(&mistyped).unwrap());
        assert!(
            r.findings
                .iter()
                .any(|x| x.rule == "GPU003" && x.path == at),
            "{at}: no GPU003 for a wrong type: {:#?}",
            r.findings
        );
        if f.required {
            let mut missing = base.clone();
            edit_at(&mut missing, &at, None);
            let r = run(&serde_json::to_string_pretty(&missing).unwrap());
            assert!(
                r.findings
                    .iter()
                    .any(|x| x.rule == "GPU004" && x.path == at),
                "{at}: no GPU004 when it is missing: {:#?}",
                r.findings
            );
        }
    }
    assert!(
        checked > 50,
        "only {checked} fields of the base were checked"
    );
}

/// Issue 26's bar: a blueprint with an RTX PRO 5000 Blackwell MIG layout, a GB300 NVL72 MIG layout
/// and an L40 pool validates clean on the 25.10 line that introduced GB300, with 595.58.03 (GB300's
/// MIG floor since the 2026-12 facts audit, D1: the DGX Station's R595 row, which shares the NVL72's
/// PCI id); an invented profile on each pool fails. The blueprint names v25.10.1, whose final matrix
/// validates 595.58.03 (and gpuctl has no chart key tree for v25.10.0, GPU019).
pub(crate) const OPERATOR_LISTED_GPUS: &str =
    include_str!("../../../../tests/fixtures/catalog/operator-listed-gpus.yaml");

#[test]
fn operator_listed_gpus_validate_and_invented_profiles_fail() {
    let r = run(OPERATOR_LISTED_GPUS);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    // (edit, rule, path): one invented profile per pool.
    let cases: &[(&str, &str, &str, &str)] = &[
        // The older MIG guide's quarter-slice name; the current table has halves.
        (
            "layout: { \"1g.24gb\": 2 }",
            "layout: { \"1g.12gb\": 4 }",
            "GPU031",
            "spec.nodePools[0].partitioning.mig.layout",
        ),
        (
            "layout: { \"3g.139gb\": 2 }",
            "layout: { \"3g.140gb\": 2 }",
            "GPU031",
            "spec.nodePools[1].partitioning.mig.layout",
        ),
        (
            "gpu: { model: L40, count: 8 }\n",
            "gpu: { model: L40, count: 8 }\n      partitioning: { mode: mig, mig: { strategy: mixed, layout: { \"1g.12gb\": 4 } } }\n",
            "GPU030",
            "spec.nodePools[2].partitioning.mode",
        ),
    ];
    for (from, to, rule, path) in cases {
        let r = run(&edit(OPERATOR_LISTED_GPUS, &[(from, to)]));
        let f = r
            .findings
            .iter()
            .find(|f| f.rule == *rule)
            .unwrap_or_else(|| panic!("{rule} for {to}: {:#?}", r.findings));
        assert!(f.path.starts_with(path), "{rule}: {}", f.path);
        assert_eq!(f.severity, Severity::Error);
    }
    // On v25.10.0 with its own driver (580.95.05) the GB300 MIG pool is under the floor, besides
    // the missing chart key tree; the release before it refuses the GB300 pool; a driver under the
    // MIG floor fails.
    let r = run(&edit(
        OPERATOR_LISTED_GPUS,
        &[
            ("version: v25.10.1", "version: v25.10.0"),
            ("version: \"595.58.03\"", "version: \"580.95.05\""),
        ],
    ));
    assert_eq!(rules(&r), ["GPU019", "GPU025"], "{:#?}", r.findings);
    let r = run(&edit(
        OPERATOR_LISTED_GPUS,
        &[("version: v25.10.1", "version: v25.3.4")],
    ));
    assert!(rules(&r).contains(&"GPU036"), "{:#?}", r.findings);
    let r = run(&edit(
        OPERATOR_LISTED_GPUS,
        &[("version: \"595.58.03\"", "version: \"580.178.04\"")],
    ));
    let f = r.findings.iter().find(|f| f.rule == "GPU025").unwrap();
    assert!(
        f.message.contains("MIG on GB300 needs driver 595.58.03"),
        "{}",
        f.message
    );
}

/// GPU027 says why v26.7.1 is refused (not captured), and GPU028 names v25.10.1's final matrix.
#[test]
fn operator_findings_say_what_is_not_captured_or_confirmed() {
    let r = run(&edit(
        KUEUE_BASE,
        &[("version: v26.7.0", "version: v26.7.1")],
    ));
    let f = r.findings.iter().find(|f| f.rule == "GPU027").unwrap();
    assert!(
        f.message
            .contains("not in the catalog (no NVIDIA source read"),
        "{}",
        f.message
    );
    let r = run(&edit(
        KUEUE_BASE,
        &[("version: v26.7.0", "version: v26.7.9")],
    ));
    let f = r.findings.iter().find(|f| f.rule == "GPU027").unwrap();
    assert!(!f.message.contains('('), "{}", f.message);
    let on_25_10_1 = |driver: &str| {
        edit(
            KUEUE_BASE,
            &[
                ("version: v26.7.0", "version: v25.10.1"),
                ("version: \"595.91.07\"", driver),
            ],
        )
    };
    // The final release-25.10 page (2026-12 facts audit, W2) does not list 580.173.02: it is
    // refused outright, no longer "may list it"; 610.57.04, which the page added, passes.
    let r = run(&on_25_10_1("version: \"580.173.02\""));
    let f = r.findings.iter().find(|f| f.rule == "GPU028").unwrap();
    assert!(!f.message.contains("may list it"), "{}", f.message);
    let r = run(&on_25_10_1("version: \"610.57.04\""));
    assert!(!rules(&r).contains(&"GPU028"), "{:#?}", r.findings);
    let r = run(&on_25_10_1("version: \"580.65.06\""));
    let f = r.findings.iter().find(|f| f.rule == "GPU028").unwrap();
    assert!(!f.message.contains("may list it"), "{}", f.message);
    let r = run(&on_25_10_1("version: \"580.178.04\""));
    assert!(!rules(&r).contains(&"GPU028"), "{:#?}", r.findings);
}

/// GPU037/GPU038 name what the release's page lists.
#[test]
fn os_findings_list_the_supported_systems() {
    let r = run(&edit(KUEUE_BASE, &[(TRAIN_GPU, TRAIN_OS_WINDOWS)]));
    let f = r.findings.iter().find(|f| f.rule == "GPU037").unwrap();
    assert_eq!(f.path, "spec.nodePools[0].os");
    assert!(
        f.message.contains("does not support `windows`"),
        "{}",
        f.message
    );
    assert!(f.message.contains("ubuntu 26.04"), "{}", f.message);
    let r = run(&edit(KUEUE_BASE, &[(TRAIN_GPU, TRAIN_OS_FOCAL)]));
    let f = r.findings.iter().find(|f| f.rule == "GPU037").unwrap();
    assert!(
        f.message.contains("does not support ubuntu 20.04"),
        "{}",
        f.message
    );
    // The same pool on v25.10.1, whose page still lists 20.04, passes.
    let r = run(&edit(
        KUEUE_BASE,
        &[
            (TRAIN_GPU, TRAIN_OS_FOCAL),
            ("version: v26.7.0", "version: v25.10.1"),
            ("version: \"595.91.07\"", "version: \"580.105.08\""),
        ],
    ));
    assert!(!rules(&r).contains(&"GPU037"), "{:#?}", r.findings);
    let r = run(&edit(KUEUE_BASE, &[(TRAIN_GPU, TRAIN_OS_HWE_KERNEL)]));
    let f = r.findings.iter().find(|f| f.rule == "GPU038").unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("5.15, 6.5, 6.8"), "{}", f.message);
}

/// Issue 26: `validate` knows every GPU the operator lists that the catalog gained: each is
/// accepted as a time-sliced pool's model, a MIG layout on it is refused unless the MIG guide
/// lists it, and a Rubin model is told what NVIDIA has not published rather than offered a
/// near-miss key.
#[test]
fn validate_knows_the_operator_listed_gpus() {
    // (model, has MIG)
    let rows = [
        ("L40", false),
        ("L20", false),
        ("A40", false),
        ("A16", false),
        ("A2", false),
        ("A100X", false),
        ("A30X", false),
        ("RTX-PRO-6000D", false),
        ("GB10", false),
        ("RTX-PRO-5000-BLACKWELL", true),
        ("RTX-PRO-4500-BLACKWELL", true),
    ];
    for (model, mig) in rows {
        let shared = edit(KUEUE_BASE, &[("model: L4,", &format!("model: {model},"))]);
        let r = run(&shared);
        assert!(
            !rules(&r).iter().any(|id| ["GPU015", "GPU030"].contains(id)),
            "{model}: {:#?}",
            r.findings
        );
        let on_mig = edit(
            KUEUE_BASE,
            &[
                ("model: A100-SXM4-80GB", &format!("model: {model}")),
                ("layout: { \"3g.40gb\": 2 }", "layout: { \"1g.99gb\": 1 }"),
            ],
        );
        let want = if mig { "GPU031" } else { "GPU030" };
        assert!(rules(&run(&on_mig)).contains(&want), "{model}: {want}");
    }
    for model in ["Rubin", "VERA-RUBIN-NVL144"] {
        let r = run(&edit(
            KUEUE_BASE,
            &[("model: L4,", &format!("model: {model},"))],
        ));
        let f = r.findings.iter().find(|f| f.rule == "GPU015").unwrap();
        let hint = f.hint.as_deref().unwrap_or_default();
        assert!(
            hint.contains("no Rubin GPU is in the catalog (the architecture is in preview)"),
            "{hint}"
        );
        // The 2026-12 facts audit gave Rubin its R615 floor, so the product is what is missing.
        assert!(hint.contains("any product"), "{hint}");
    }
}

/// GPU092 at its bounds (profiles/dcgm.yaml `alert_bounds.temperature_c`: above 18, at most 100):
/// the last value that passes and the first that fails on each side, and what the finding says.
#[test]
fn gpu092_temperature_bounds_table() {
    let b = gpuctl_model::profiles::Catalog::embedded()
        .dcgm()
        .alert_bounds
        .temperature_c;
    assert_eq!((b.min, b.max), (18.0, 100.0));
    for (t, fires) in [
        (0, true),
        (18, true),
        (19, false),
        (85, false),
        (100, false),
        (101, true),
        (1000, true),
    ] {
        let to = format!("temperatureC: {t}");
        let text = edit(KUEUE_BASE, &[("temperatureC: 85", to.as_str())]);
        let r = run(&text);
        let f: Vec<_> = r.findings.iter().filter(|f| f.rule == "GPU092").collect();
        assert_eq!(f.len(), usize::from(fires), "{t} C: {f:#?}");
        if let Some(f) = f.first() {
            assert_eq!(f.path, "spec.monitoring.alerts.temperatureC");
            let says = if t > 100 {
                "can never fire"
            } else {
                "fires on every GPU"
            };
            assert!(f.message.contains(says), "{}", f.message);
        }
    }
}

/// GPU075 reads only what pods request: a tenant quota key on a DRA device class
/// (`<class>.deviceclass.resource.k8s.io/devices`) is charged by the API server from claims and
/// never read by Kueue, so it needs no ClusterQueue quota; any other uncovered resource still
/// fails. (Issue 39, Deliver 6: valid DRA tenants were refused.)
#[test]
fn gpu075_skips_dra_device_class_quota_keys() {
    let quota = "quota: { nvidia.com/gpu: 16, pods: 50";
    // (extra quota keys, GPU075 expected)
    let rows = [
        (
            "gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 4",
            false,
        ),
        (
            "mig.nvidia.com.deviceclass.resource.k8s.io/devices: 2",
            false,
        ),
        ("count/resourceclaims.resource.k8s.io: 10", false),
        ("example.com/fpga: 1", true),
        // No class before the suffix: not a DRA device key, so still a resource pods would name.
        (".deviceclass.resource.k8s.io/devices: 1", true),
    ];
    for (extra, fails) in rows {
        let r = run(&edit(
            KUEUE_BASE,
            &[(
                quota,
                &format!("quota: {{ nvidia.com/gpu: 16, {extra}, pods: 50"),
            )],
        ));
        assert_eq!(
            rules(&r).contains(&"GPU075"),
            fails,
            "{extra}: {:#?}",
            r.findings
        );
    }
}
