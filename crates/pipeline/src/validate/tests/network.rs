//! Table cases of the network, topology and NUMA rules (GPU130-GPU156), on a base that uses every
//! network field: an InfiniBand pool with GPUDirect RDMA, topology levels, a kubelet NUMA policy,
//! the Network Operator and RDMA quota.

use super::{Case, KUEUE_BASE, edit, rules, run};

const POOL_TOPOLOGY: &str = "      os: { id: ubuntu, version: \"22.04\", kernel: \"5.15.0-1055-aws\" }
      topology:
        interconnect: nvswitch
        numaNodes: 2
        network: { fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true }
        levels: [topology.example.com/block, topology.example.com/rack, kubernetes.io/hostname]
        kubelet: { topologyManagerPolicy: restricted, topologyManagerScope: pod, cpuManagerPolicy: static, reservedSystemCPUs: \"0-1\", memoryManagerPolicy: Static, reservedMemory: { \"0\": 1Gi, \"1\": 1Gi } }
      labels: { gpu.example.com/tier: premium }
";

const NETWORK_OPERATOR: &str = "  networkOperator:
    version: v26.4.1
    nicDriver: { source: operator, version: \"doca3.3.0-26.01-1.0.0.0-0\" }
    devicePlugin: { kind: rdma-shared, resourceName: rdma_shared_device_a, hcaMax: 63 }
    secondaryNetwork: { kind: ipoib, name: ib-net, master: ibp12s0, range: 192.168.100.0/24 }
  upgrades:
";

/// The Kueue base with every network field set and clean.
pub(super) fn net_base() -> String {
    edit(
        KUEUE_BASE,
        &[
            (
                "      labels: { gpu.example.com/tier: premium }\n",
                POOL_TOPOLOGY,
            ),
            ("  upgrades:\n", NETWORK_OPERATOR),
            (
                "quota: { nvidia.com/gpu: 8, cpu: \"32\", memory: 1Ti }",
                "quota: { nvidia.com/gpu: 8, cpu: \"32\", memory: 1Ti, rdma/rdma_shared_device_a: 16 }",
            ),
            (
                "quota: { nvidia.com/gpu: 16, pods: 50, requests.cpu: \"64\" }",
                "quota: { nvidia.com/gpu: 16, pods: 50, requests.cpu: \"64\", rdma/rdma_shared_device_a: 32 }",
            ),
        ],
    )
}

const KMT: &str = "      kernelModuleType: auto\n";

const SHORTHAND: &str = "    secondaryNetwork: { kind: ipoib, name: ib-net, master: ibp12s0, range: 192.168.100.0/24 }\n";

const IP_POOLS: &str = "    secondaryNetwork: { kind: ipoib, name: ib-net, master: ibp12s0, ipPool: ib-pool }
    ipPools:
      - { name: ib-pool, range: 10.210.0.0/16, gateway: 10.210.0.1, perNodeBlockSize: 64, exclusions: [{ startIP: 10.210.0.2, endIP: 10.210.0.9 }], nodePools: [train] }
      - { name: rail-1, kind: cidrpool, range: 10.220.0.0/16, perNodeNetworkPrefix: 24, gatewayIndex: 1, defaultGateway: true }
      - { name: rail-v6, kind: cidrpool, range: \"fd00:10:220::/48\", perNodeNetworkPrefix: 64 }
";

/// The network base with explicit nv-ipam pools (an IPPool the network uses, two CIDRPools) and
/// the cluster's pod and Service ranges declared, all clean.
pub(super) fn pools_base() -> String {
    edit(
        &net_base(),
        &[
            (SHORTHAND, IP_POOLS),
            (
                "    version: \"1.34.2\"\n",
                "    version: \"1.34.2\"\n    podCIDR: 10.244.0.0/16\n    serviceCIDR: \"10.96.0.0/12,fd00:96::/108\"\n",
            ),
        ],
    )
}

pub(super) fn cases() -> Vec<Case> {
    let n = net_base();
    let k = KUEUE_BASE.to_string();
    let mut all = vec![
        (
            "GPU130",
            n.clone(),
            vec![("fabric: infiniband", "fabric: ethernet")],
        ),
        ("GPU131", n.clone(), vec![("nicsPerNode: 8, ", "")]),
        (
            "GPU131",
            n.clone(),
            vec![("nicsPerNode: 8, ", "nicsPerNode: 0, ")],
        ),
        (
            "GPU132",
            n.clone(),
            vec![(KMT, "      kernelModuleType: proprietary\n")],
        ),
        (
            "GPU133",
            n.clone(),
            vec![(
                "kernel: \"5.15.0-1055-aws\"",
                "kernel: \"4.18.0-553.el8_10.x86_64\"",
            )],
        ),
        (
            "GPU135",
            n.clone(),
            vec![("version: \"595.91.07\"", "version: \"470.256.02\"")],
        ),
        (
            "GPU136",
            n.clone(),
            vec![(
                KMT,
                "      kernelModuleType: auto\n    rdma: { mechanism: nvidia-peermem, useHostMofed: true }\n",
            )],
        ),
        (
            "GPU136",
            n.clone(),
            vec![
                (
                    KMT,
                    "      kernelModuleType: auto\n    rdma: { mechanism: nvidia-peermem }\n",
                ),
                (
                    "nicDriver: { source: operator, version: \"doca3.3.0-26.01-1.0.0.0-0\" }",
                    "nicDriver: { source: host }",
                ),
            ],
        ),
        (
            "GPU137",
            k.clone(),
            vec![(
                KMT,
                "      kernelModuleType: auto\n    rdma: { mechanism: dma-buf }\n",
            )],
        ),
        (
            "GPU140",
            n.clone(),
            vec![(
                "levels: [topology.example.com/block, topology.example.com/rack, kubernetes.io/hostname]",
                "levels: [kubernetes.io/hostname, topology.example.com/rack]",
            )],
        ),
        (
            "GPU140",
            n.clone(),
            vec![(
                "levels: [topology.example.com/block, topology.example.com/rack, kubernetes.io/hostname]",
                "levels: [topology.example.com/rack, topology.example.com/rack, kubernetes.io/hostname]",
            )],
        ),
        (
            "GPU140",
            n.clone(),
            vec![(
                "levels: [topology.example.com/block, topology.example.com/rack, kubernetes.io/hostname]",
                "levels: [\"not a label!\", kubernetes.io/hostname]",
            )],
        ),
        (
            "GPU140",
            n.clone(),
            vec![(
                "levels: [topology.example.com/block, topology.example.com/rack, kubernetes.io/hostname]",
                "levels: [l1, l2, l3, l4, l5, l6, l7, l8, l9, l10, l11, l12, l13, l14, l15, l16, kubernetes.io/hostname]",
            )],
        ),
        (
            "GPU141",
            n.clone(),
            vec![("queueing: kueue", "queueing: none")],
        ),
        (
            "GPU142",
            n.clone(),
            vec![(
                "topology.example.com/rack, kubernetes.io/hostname]",
                "topology.example.com/rack]",
            )],
        ),
        (
            "GPU143",
            n.clone(),
            vec![(
                "topologyManagerPolicy: restricted",
                "topologyManagerPolicy: single-numa-node",
            )],
        ),
        (
            "GPU145",
            n.clone(),
            vec![("cpuManagerPolicy: static", "cpuManagerPolicy: none")],
        ),
        (
            "GPU146",
            n.clone(),
            vec![("reservedSystemCPUs: \"0-1\", ", "")],
        ),
        (
            "GPU147",
            n.clone(),
            vec![(", reservedMemory: { \"0\": 1Gi, \"1\": 1Gi }", "")],
        ),
        (
            "GPU147",
            n.clone(),
            vec![(
                "reservedMemory: { \"0\": 1Gi, \"1\": 1Gi }",
                "reservedMemory: { \"0\": 1Gi, \"7\": 1Gi }",
            )],
        ),
        ("GPU148", n.clone(), vec![("numaNodes: 2", "numaNodes: 16")]),
        (
            "GPU149",
            n.clone(),
            vec![(
                "topologyManagerPolicy: restricted",
                "topologyManagerPolicy: none",
            )],
        ),
        (
            "GPU150",
            n.clone(),
            vec![("version: v26.4.1", "version: v9.9.9")],
        ),
        (
            "GPU150",
            n.clone(),
            vec![("version: \"1.34.2\"", "version: \"1.20.4\"")],
        ),
        // Issue 26: the documented range of 26.4 ends at 1.35 although the chart's
        // `kubeVersion` (>= 1.21.0-0) would install on 1.36.
        (
            "GPU150",
            n.clone(),
            vec![("version: \"1.34.2\"", "version: \"1.36.1\"")],
        ),
        // DMA-BUF needs CUDA 11.7, so its driver 515.43.04 or newer.
        (
            "GPU135",
            n.clone(),
            vec![("version: \"595.91.07\"", "version: \"510.47.03\"")],
        ),
        // DMA-BUF needs a Turing or newer GPU.
        (
            "GPU132",
            n.clone(),
            vec![
                ("model: H100-SXM5-80GB", "model: V100-SXM2-32GB"),
                (KMT, "      kernelModuleType: open\n"),
            ],
        ),
        (
            "GPU151",
            n.clone(),
            vec![(
                "nicDriver: { source: operator,",
                "nicDriver: { source: host,",
            )],
        ),
        ("GPU152", n.clone(), vec![("kind: ipoib", "kind: macvlan")]),
        (
            "GPU152",
            n.clone(),
            vec![("kind: ipoib", "kind: host-device")],
        ),
        (
            "GPU153",
            n.clone(),
            vec![(
                "network: { fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true }",
                "network: { fabric: ethernet, nicsPerNode: 2 }",
            )],
        ),
        (
            "GPU154",
            n.clone(),
            vec![("rdma/rdma_shared_device_a: 32", "rdma/hca: 8")],
        ),
        (
            "GPU154",
            k.clone(),
            vec![(
                "quota: { nvidia.com/gpu: 16, pods: 50",
                "quota: { rdma/rdma_shared_device_a: 4, nvidia.com/gpu: 16, pods: 50",
            )],
        ),
        ("GPU155", n.clone(), vec![("master: ibp12s0, ", "")]),
        ("GPU155", n.clone(), vec![("hcaMax: 63", "hcaMax: 0")]),
        (
            "GPU155",
            n.clone(),
            vec![(
                "    version: v26.4.1\n",
                "    version: v26.4.1\n    namespace: gpu-operator\n",
            )],
        ),
        (
            "GPU156",
            n.clone(),
            vec![(
                "    version: v26.4.1\n",
                "    version: v26.4.1\n    values: { operatr: { nodeSelector: {} } }\n",
            )],
        ),
    ];
    all.extend(ip_pool_cases());
    all
}

/// Failing cases of the IP pool rules (GPU160-GPU164).
fn ip_pool_cases() -> Vec<Case> {
    let n = net_base();
    let p = pools_base();
    vec![
        // The shorthand's range, IPv4 and IPv6.
        (
            "GPU160",
            n.clone(),
            vec![("range: 192.168.100.0/24", "range: 192.168.100.0")],
        ),
        (
            "GPU160",
            n.clone(),
            vec![("range: 192.168.100.0/24", "range: \"fd00::1::/64\"")],
        ),
        (
            "GPU160",
            p.clone(),
            vec![("range: 10.220.0.0/16", "range: 10.220.0.0/33")],
        ),
        // A CIDRPool written with host bits.
        (
            "GPU160",
            p.clone(),
            vec![("range: 10.220.0.0/16", "range: 10.220.3.0/16")],
        ),
        (
            "GPU160",
            p.clone(),
            vec![("endIP: 10.210.0.9", "endIP: 10.211.0.9")],
        ),
        (
            "GPU160",
            p.clone(),
            vec![("startIP: 10.210.0.2", "startIP: 10.210.0.20")],
        ),
        (
            "GPU160",
            p.clone(),
            vec![("podCIDR: 10.244.0.0/16", "podCIDR: 10.244.0.0")],
        ),
        (
            "GPU161",
            p.clone(),
            vec![("gateway: 10.210.0.1", "gateway: 10.211.0.1")],
        ),
        (
            "GPU161",
            p.clone(),
            vec![("gateway: 10.210.0.1", "gateway: 10.210.0.0")],
        ),
        (
            "GPU161",
            p.clone(),
            vec![("gateway: 10.210.0.1", "gateway: 10.210.255.255")],
        ),
        (
            "GPU161",
            p.clone(),
            vec![("gateway: 10.210.0.1", "gateway: \"fd00::1\"")],
        ),
        (
            "GPU161",
            p.clone(),
            vec![("gatewayIndex: 1, ", "gatewayIndex: 256, ")],
        ),
        ("GPU161", p.clone(), vec![("gatewayIndex: 1, ", "")]),
        // A block larger than the range, and blocks for 4 nodes in a range of 3.
        (
            "GPU162",
            n.clone(),
            vec![(
                "range: 192.168.100.0/24 }",
                "range: 192.168.100.0/24, perNodeBlockSize: 300 }",
            )],
        ),
        (
            "GPU162",
            n.clone(),
            vec![(
                "range: 192.168.100.0/24 }",
                "range: 192.168.100.0/24, perNodeBlockSize: 64 }",
            )],
        ),
        (
            "GPU162",
            n.clone(),
            vec![(
                "range: 192.168.100.0/24 }",
                "range: 192.168.100.0/24, perNodeBlockSize: 1 }",
            )],
        ),
        (
            "GPU162",
            p.clone(),
            vec![("perNodeNetworkPrefix: 24, ", "perNodeNetworkPrefix: 15, ")],
        ),
        (
            "GPU162",
            p.clone(),
            vec![("perNodeNetworkPrefix: 24, ", "")],
        ),
        // 8 nodes need 8 /64 subnets; a /62 has 4.
        (
            "GPU162",
            p.clone(),
            vec![(
                "range: \"fd00:10:220::/48\"",
                "range: \"fd00:10:220::/62\", nodePools: [train, infer, dev]",
            )],
        ),
        (
            "GPU163",
            p.clone(),
            vec![("range: 10.220.0.0/16", "range: 10.210.0.0/16")],
        ),
        (
            "GPU163",
            p.clone(),
            vec![("podCIDR: 10.244.0.0/16", "podCIDR: 10.0.0.0/8")],
        ),
        (
            "GPU163",
            p.clone(),
            vec![(
                "serviceCIDR: \"10.96.0.0/12,fd00:96::/108\"",
                "serviceCIDR: \"10.96.0.0/12,fd00::/16\"",
            )],
        ),
        (
            "GPU164",
            p.clone(),
            vec![("ipPool: ib-pool", "ipPool: ib-pol")],
        ),
        (
            "GPU164",
            p.clone(),
            vec![("ipPool: ib-pool", "ipPool: ib-pool, range: 10.230.0.0/16")],
        ),
        ("GPU164", p.clone(), vec![(", ipPool: ib-pool", "")]),
        ("GPU164", p.clone(), vec![("name: rail-1", "name: ib-pool")]),
        ("GPU164", p.clone(), vec![("name: rail-1", "name: Rail_1")]),
        (
            "GPU164",
            p.clone(),
            vec![("nodePools: [train]", "nodePools: [trian]")],
        ),
        (
            "GPU164",
            p.clone(),
            vec![("gatewayIndex: 1, ", "gateway: 10.220.0.1, ")],
        ),
        (
            "GPU164",
            p.clone(),
            vec![("gateway: 10.210.0.1, ", "gatewayIndex: 1, ")],
        ),
        // The shorthand's pool is named after the network: a declared pool of that name clashes.
        (
            "GPU164",
            edit(
                &n,
                &[(
                    "range: 192.168.100.0/24 }\n",
                    "range: 192.168.100.0/24 }\n    ipPools: [{ name: ib-net, range: 10.210.0.0/16 }]\n",
                )],
            ),
            vec![],
        ),
    ]
}

/// Rules whose failing case needs facts the embedded catalog does not have (every catalog
/// operator release is newer than the RDMA minimums); each has its own test below.
pub(super) const PATCHED_CATALOG_RULES: &[&str] = &["GPU134"];

pub(super) fn passing_cases() -> Vec<Case> {
    let n = net_base();
    let mut all = vec![
        // 515.43.04 is CUDA 11.7's driver: enough for DMA-BUF.
        (
            "GPU135",
            n.clone(),
            vec![("version: \"595.91.07\"", "version: \"515.43.04\"")],
        ),
        // Network Operator 26.7 documents Kubernetes 1.36.
        (
            "GPU150",
            n.clone(),
            vec![
                ("version: \"1.34.2\"", "version: \"1.36.1\""),
                ("version: v26.4.1", "version: v26.7.0"),
            ],
        ),
        (
            "GPU130",
            n.clone(),
            vec![("fabric: infiniband", "fabric: roce")],
        ),
        (
            "GPU132",
            n.clone(),
            vec![(
                KMT,
                "      kernelModuleType: proprietary\n    rdma: { mechanism: nvidia-peermem }\n",
            )],
        ),
        (
            "GPU132",
            n.clone(),
            vec![(KMT, "      kernelModuleType: open\n")],
        ),
        (
            "GPU133",
            n.clone(),
            vec![(
                "kernel: \"5.15.0-1055-aws\"",
                "kernel: \"6.8.0-1015-nvidia\"",
            )],
        ),
        // No kernel declared: nothing to compare.
        (
            "GPU133",
            n.clone(),
            vec![(
                "      os: { id: ubuntu, version: \"22.04\", kernel: \"5.15.0-1055-aws\" }\n",
                "",
            )],
        ),
        (
            "GPU136",
            n.clone(),
            vec![(
                KMT,
                "      kernelModuleType: auto\n    rdma: { mechanism: nvidia-peermem }\n",
            )],
        ),
        (
            "GPU145",
            n.clone(),
            vec![
                (
                    "topologyManagerPolicy: restricted",
                    "topologyManagerPolicy: best-effort",
                ),
                ("cpuManagerPolicy: static", "cpuManagerPolicy: none"),
            ],
        ),
        ("GPU148", n.clone(), vec![("numaNodes: 2", "numaNodes: 8")]),
        // single-numa-node where a NUMA node holds every GPU of the node, or on an inference pool.
        (
            "GPU143",
            n.clone(),
            vec![
                (
                    "topologyManagerPolicy: restricted",
                    "topologyManagerPolicy: single-numa-node",
                ),
                ("numaNodes: 2", "numaNodes: 1"),
                (
                    ", reservedMemory: { \"0\": 1Gi, \"1\": 1Gi }",
                    ", reservedMemory: { \"0\": 1Gi }",
                ),
            ],
        ),
        (
            "GPU152",
            n.clone(),
            vec![
                ("fabric: infiniband", "fabric: roce"),
                ("kind: ipoib", "kind: macvlan"),
            ],
        ),
        (
            "GPU154",
            n.clone(),
            vec![(
                "rdma/rdma_shared_device_a: 32",
                "requests.rdma/rdma_shared_device_a: 32",
            )],
        ),
        (
            "GPU154",
            n.clone(),
            vec![
                ("kind: rdma-shared", "kind: sriov"),
                (
                    "secondaryNetwork: { kind: ipoib",
                    "secondaryNetwork: { kind: host-device",
                ),
                (
                    "rdma/rdma_shared_device_a: 32",
                    "nvidia.com/rdma_shared_device_a: 32",
                ),
                (
                    "rdma/rdma_shared_device_a: 16",
                    "nvidia.com/rdma_shared_device_a: 16",
                ),
            ],
        ),
    ];
    all.extend(ip_pool_passing_cases());
    all
}

/// Passing cases of the IP pool rules, each next to a failing one.
fn ip_pool_passing_cases() -> Vec<Case> {
    let n = net_base();
    let p = pools_base();
    vec![
        ("GPU160", p.clone(), vec![]),
        (
            "GPU160",
            n.clone(),
            vec![("range: 192.168.100.0/24", "range: \"fd00:100::/64\"")],
        ),
        // An IPPool range with host bits is what nv-ipam reads as its network.
        (
            "GPU160",
            p.clone(),
            vec![("range: 10.210.0.0/16", "range: 10.210.0.7/16")],
        ),
        ("GPU161", p.clone(), vec![]),
        (
            "GPU161",
            p.clone(),
            vec![("gateway: 10.210.0.1", "gateway: 10.210.255.254")],
        ),
        (
            "GPU161",
            p.clone(),
            vec![("gatewayIndex: 1, ", "gatewayIndex: 254, ")],
        ),
        ("GPU162", p.clone(), vec![]),
        // The train pool's 4 nodes: 4 blocks of 63 fit the 254 host addresses of a /24 (of 64, 3).
        (
            "GPU162",
            n.clone(),
            vec![(
                "range: 192.168.100.0/24 }",
                "range: 192.168.100.0/24, perNodeBlockSize: 63 }",
            )],
        ),
        (
            "GPU162",
            p.clone(),
            vec![(
                "range: \"fd00:10:220::/48\"",
                "range: \"fd00:10:220::/61\", nodePools: [train, infer, dev]",
            )],
        ),
        ("GPU163", p.clone(), vec![]),
        // Another family never overlaps.
        (
            "GPU163",
            p.clone(),
            vec![("podCIDR: 10.244.0.0/16", "podCIDR: \"fd00:10:210::/56\"")],
        ),
        ("GPU164", p.clone(), vec![]),
        ("GPU164", n.clone(), vec![]),
    ]
}

#[test]
fn network_base_is_clean() {
    let r = run(&net_base());
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let r = run(&pools_base());
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
}

/// Findings about pools are at the line of the field they name, and say which sizes fit.
#[test]
fn ip_pool_findings_are_located_and_say_what_fits() {
    let text = edit(
        &pools_base(),
        &[(
            "perNodeBlockSize: 64, exclusions",
            "perNodeBlockSize: 32768, exclusions",
        )],
    );
    let r = run(&text);
    let f: Vec<_> = r.findings.iter().filter(|f| f.rule == "GPU162").collect();
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    let line = text
        .lines()
        .position(|l| l.contains("perNodeBlockSize: 32768"))
        .unwrap()
        + 1;
    assert_eq!(f[0].pos.as_ref().map(|p| p.line), Some(line), "{:#?}", f[0]);
    assert_eq!(
        f[0].path,
        "spec.networkOperator.ipPools[0].perNodeBlockSize"
    );
    // 4 train nodes of 32768 addresses need 131072; a /16 has 65534 host addresses.
    assert!(
        f[0].message.contains("65534") && f[0].message.contains("4 nodes"),
        "{}",
        f[0].message
    );
    let hint = f[0].hint.as_deref().unwrap();
    assert!(
        hint.contains("at most 16383") && hint.contains("/14"),
        "{hint}"
    );
}

/// GPU134 with a catalog whose nvidia-peermem and useHostMofed minimums are newer than the
/// blueprint's operator release: the rule reads the minimums from `profiles/network.yaml`, never
/// from code. DMA-BUF has no documented first operator release (issue 26), so a DMA-BUF blueprint
/// never gets GPU134, whatever the catalog.
#[test]
fn gpu134_operator_older_than_the_rdma_minimum() {
    use gpuctl_model::profiles::{Catalog, ProfileSources};
    let patched = ProfileSources::EMBEDDED
        .network
        .replace("min_operator: \"v1.8.0\"", "min_operator: \"v27.1.0\"")
        .replace("min_operator: \"v1.9.0\"", "min_operator: \"v28.1.0\"");
    assert_ne!(
        patched,
        ProfileSources::EMBEDDED.network,
        "the minimums moved"
    );
    let mut src = ProfileSources::EMBEDDED;
    src.network = &patched;
    let catalog = Catalog::from_sources(&src).expect("patched catalog loads");
    let check = |text: &str| {
        super::super::check_bytes(
            "test.yaml",
            text.as_bytes().to_vec(),
            &catalog,
            super::super::Options {
                today: jiff::civil::date(2026, 11, 30),
            },
        )
    };
    let r = check(&net_base());
    assert!(
        !rules(&r).contains(&"GPU134"),
        "DMA-BUF has no operator minimum: {:#?}",
        r.findings
    );
    let peermem = edit(
        &net_base(),
        &[(
            KMT,
            "      kernelModuleType: auto\n    rdma: { mechanism: nvidia-peermem }\n",
        )],
    );
    let r = check(&peermem);
    let f: Vec<_> = r.findings.iter().filter(|f| f.rule == "GPU134").collect();
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("v27.1.0"), "{}", f[0].message);
    assert!(f[0].message.contains("nvidia-peermem"), "{}", f[0].message);
    assert_eq!(f[0].path, "spec.gpuOperator.version");
    let host = edit(
        &net_base(),
        &[
            (
                KMT,
                "      kernelModuleType: auto\n    rdma: { mechanism: nvidia-peermem, useHostMofed: true }\n",
            ),
            (
                "nicDriver: { source: operator, version: \"doca3.3.0-26.01-1.0.0.0-0\" }",
                "nicDriver: { source: host }",
            ),
        ],
    );
    let r = check(&host);
    let msgs: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.rule == "GPU134")
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs.iter().any(|m| m.contains("useHostMofed")), "{msgs:?}");
    // The embedded catalog accepts all three.
    for text in [net_base(), peermem, host] {
        assert!(!rules(&run(&text)).contains(&"GPU134"));
    }
}

/// `auto` counts as the open modules only where the operator would load them: a GPU with open
/// modules on a branch that defaults to them.
#[test]
fn auto_kernel_modules_resolve_per_branch() {
    let old_branch = edit(
        &net_base(),
        &[("version: \"595.91.07\"", "version: \"550.163.01\"")],
    );
    let r = run(&old_branch);
    let f = r.findings.iter().find(|f| f.rule == "GPU132");
    let f = f.unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert!(
        f.message.contains("`auto` loads the proprietary modules"),
        "{}",
        f.message
    );
}

/// With `nicDriver.source: operator` and no version, every release in the catalog renders the
/// DOCA-OFED driver it ships (profiles/network.yaml `doca_driver`; tests/offline/render_network.rs
/// checks the rendered NicClusterPolicy), so GPU151 stays quiet; GPU132 and GPU135 say why DMA-BUF
/// refuses a pool.
#[test]
fn network_findings_name_the_documented_facts() {
    let no_version = edit(
        &net_base(),
        &[(
            "nicDriver: { source: operator, version: \"doca3.3.0-26.01-1.0.0.0-0\" }",
            "nicDriver: { source: operator }",
        )],
    );
    for release in ["v26.4.1", "v26.4.0", "v26.7.0"] {
        let text = edit(
            &no_version,
            &[("version: v26.4.1", &format!("version: {release}"))],
        );
        let r = run(&text);
        assert!(
            !r.findings.iter().any(|f| f.rule == "GPU151"),
            "{release}: {:?}",
            r.findings
        );
    }
    let r = run(&edit(
        &net_base(),
        &[("version: \"595.91.07\"", "version: \"510.47.03\"")],
    ));
    let f = r.findings.iter().find(|f| f.rule == "GPU135").unwrap();
    assert!(
        f.message.contains("CUDA 11.7, so driver 515.43.04"),
        "{}",
        f.message
    );
    let r = run(&edit(
        &net_base(),
        &[
            ("model: H100-SXM5-80GB", "model: V100-SXM2-32GB"),
            (KMT, "      kernelModuleType: open\n"),
        ],
    ));
    let f = r
        .findings
        .iter()
        .find(|f| f.rule == "GPU132")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!(f.path, "spec.nodePools[0].gpu.model");
    assert!(f.message.contains("Turing or newer"), "{}", f.message);
    let r = run(&edit(
        &net_base(),
        &[("version: \"1.34.2\"", "version: \"1.36.1\"")],
    ));
    let f = r.findings.iter().find(|f| f.rule == "GPU150").unwrap();
    assert!(
        f.message.contains("supports Kubernetes 1.31 to 1.35"),
        "{}",
        f.message
    );
    assert!(f.hint.as_deref().unwrap_or_default().contains("v26.7.0"));
}

/// Overlaps are found among many pools without comparing every pair: 3000 disjoint /24s and one
/// /16 over the first 256 of them give exactly those 256 findings, each at the later pool.
#[test]
fn overlaps_among_many_pools() {
    let mut pools = String::from("    ipPools:\n");
    for i in 0..3000u32 {
        pools.push_str(&format!(
            "      - {{ name: p{i}, range: 10.{}.{}.0/24, perNodeBlockSize: 2, nodePools: [train] }}\n",
            i / 256,
            i % 256
        ));
    }
    pools.push_str(
        "      - { name: wide, range: 10.0.0.0/16, perNodeBlockSize: 2, nodePools: [train] }\n",
    );
    let text = edit(
        &net_base(),
        &[("  upgrades:\n", &format!("{pools}  upgrades:\n"))],
    );
    let started = std::time::Instant::now();
    let r = run(&text);
    let overlaps: Vec<_> = r.findings.iter().filter(|f| f.rule == "GPU163").collect();
    assert_eq!(
        overlaps.len(),
        256,
        "{:#?}",
        &overlaps[..overlaps.len().min(3)]
    );
    assert!(
        overlaps
            .iter()
            .all(|f| f.path == "spec.networkOperator.ipPools[3000].range"),
        "{:#?}",
        &overlaps[..3]
    );
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
}
