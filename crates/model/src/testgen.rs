//! Generated inputs for benchmarks and scale tests: blueprints (render, plan and apply of ~5,000
//! objects). The Day-2 cluster of the shipped example is `gpuctl_day2::testgen::day2`. Not part of
//! the public interface.

use std::fmt::Write;

/// The blueprint of the render and plan benchmarks: 64 pools and 500 tenants of 2 namespaces.
pub fn large_blueprint() -> String {
    blueprint(64, 500, 2)
}

/// A valid blueprint (no error findings) with `pools` pools of 8 H100 nodes, one Kueue
/// ClusterQueue per pool in one cohort, and `tenants` tenants of `namespaces` namespaces each,
/// spread over the queues. Pools cycle through whole GPUs, MIG (`mixed`), time-slicing, and whole
/// GPUs with a per-pool driver override.
pub fn blueprint(pools: usize, tenants: usize, namespaces: usize) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: scale-test
spec:
  kubernetes:
    version: \"1.34.2\"
  gpuOperator:
    version: v26.7.0
    namespace: gpu-operator
    driver:
      version: \"580.173.02\"
      kernelModuleType: open
      upgradePolicy:
        maxParallelUpgrades: 2
        maxUnavailable: \"25%\"
        drain: {{ enable: true, timeoutSeconds: 600 }}
    dcgmExporter: {{ enabled: true, interval: 30s, serviceMonitor: true }}
  nodePools:"
    );
    for p in 0..pools {
        let _ = writeln!(
            w,
            "    - name: p{p:03}
      role: training
      selector: {{ gpuctl.dev/pool: p{p:03} }}
      nodes: 8
      gpu: {{ model: H100-SXM5-80GB, count: 8 }}
      taints:
        - {{ key: nvidia.com/gpu, value: present, effect: NoSchedule }}"
        );
        match p % 4 {
            1 => {
                let _ = writeln!(
                    w,
                    "      partitioning:
        mode: mig
        mig: {{ strategy: mixed, layout: {{ \"3g.40gb\": 2 }} }}"
                );
            }
            2 => {
                let _ = writeln!(
                    w,
                    "      partitioning:
        mode: time-slicing
        timeSlicing: {{ replicas: 4 }}"
                );
            }
            3 => {
                let _ = writeln!(w, "      driver: {{ version: \"595.91.07\" }}");
            }
            _ => {}
        }
    }
    let _ = writeln!(
        w,
        "  priorityClasses:
    - {{ name: prod-high, value: 100000, description: Production }}
    - {{ name: prod, value: 10000 }}
    - {{ name: batch, value: 1000, preemptionPolicy: Never }}
    - {{ name: dev, value: 100, preemptionPolicy: Never }}
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      config: {{ fairSharing: {{}} }}
      cohorts:
        - {{ name: all, fairSharingWeight: 1 }}
      clusterQueues:"
    );
    for p in 0..pools {
        let (res, cap) = resource(p);
        let _ = writeln!(
            w,
            "        - name: cq-p{p:03}
          cohort: all
          fairSharingWeight: 1
          preemption: {{ withinClusterQueue: LowerPriority, reclaimWithinCohort: Any }}
          resources:
            - pool: p{p:03}
              quota: {{ {res}: {cap}, cpu: \"1000\", memory: 8Ti }}"
        );
    }
    let _ = writeln!(w, "  tenants:");
    let classes = ["prod-high", "prod", "batch", "dev"];
    for t in 0..tenants {
        let p = t % pools.max(1);
        let (res, cap) = resource(p);
        let ns: Vec<String> = (0..namespaces).map(|n| format!("t{t:04}-n{n}")).collect();
        let _ = writeln!(
            w,
            "    - name: t{t:04}
      namespaces: [{}]
      priorityClass: {}
      queue: cq-p{p:03}
      quota: {{ {res}: {cap}, pods: 100, requests.cpu: \"1000\" }}
      defaults: {{ {res}: 1, cpu: \"1\" }}
      cuda: [\"12.4\"]",
            ns.join(", "),
            classes[t % classes.len()]
        );
    }
    let _ = writeln!(
        w,
        "  monitoring:
    serviceMonitor: true
    alerts: {{ xid: true, eccErrors: true, temperatureC: 85 }}"
    );
    s
}

/// The GPU resource pool `p` of [`blueprint`] advertises and its capacity (8 nodes).
fn resource(p: usize) -> (&'static str, u32) {
    match p % 4 {
        1 => ("nvidia.com/mig-3g.40gb", 8 * 16),
        2 => ("nvidia.com/gpu", 8 * 32),
        _ => ("nvidia.com/gpu", 8 * 8),
    }
}
