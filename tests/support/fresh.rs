//! A test cluster of one test's own: `tools/kube-harness/run up --dir` in a temporary directory
//! (the binaries the shared harness uses, from the same cache), stopped with `run down` when
//! dropped, also when the test panics. For tests that need a clean cluster (every example applied
//! from nothing) or one without Kueue (the Kueue release test).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

const HARNESS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/kube-harness/run");

/// A running harness of this test's own.
pub struct FreshCluster {
    harness: PathBuf,
    _dir: tempfile::TempDir,
}

impl FreshCluster {
    /// The full harness (API server, kube-controller-manager, Kueue, Volcano's webhook).
    pub fn up(name: &str) -> FreshCluster {
        FreshCluster::up_with(name, &[])
    }

    /// The harness started with extra `run up` flags (e.g. `--without-kueue`).
    pub fn up_with(name: &str, flags: &[&str]) -> FreshCluster {
        let dir = tempfile::Builder::new()
            .prefix(&format!("gpuctl-{name}-"))
            .tempdir()
            .expect("a temporary directory");
        let harness = dir.path().join("harness");
        let started = Instant::now();
        let o = Command::new(HARNESS)
            .arg("up")
            .args(flags)
            .arg("--dir")
            .arg(&harness)
            .output()
            .expect("runs tools/kube-harness/run");
        assert!(
            o.status.success(),
            "starting a fresh cluster for {name} ({flags:?}) failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!(
            "{name}: fresh cluster {flags:?} up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        FreshCluster { harness, _dir: dir }
    }

    /// Several harnesses started side by side (each `(name, run up flags)`), in the order given.
    pub fn up_all(clusters: &[(String, Vec<&str>)]) -> Vec<FreshCluster> {
        std::thread::scope(|s| {
            let handles: Vec<_> = clusters
                .iter()
                .map(|(name, flags)| s.spawn(move || FreshCluster::up_with(name, flags)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// Its kubeconfig.
    /// The log of a component the harness started (`karpenter-kwok`, `kube-scheduler`, ...).
    pub fn log(&self, component: &str) -> String {
        std::fs::read_to_string(self.harness.join(format!("{component}.log"))).unwrap_or_default()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.harness.join("kubeconfig")
    }

    /// A client of it.
    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let options = kube::config::KubeConfigOptions::default();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .unwrap();
        kube::Client::try_from(cfg).unwrap()
    }

    /// A variable of the harness's env file (`GPUCTL_HELM`, `GPUCTL_KUEUE`, ...).
    pub fn var(&self, name: &str) -> String {
        let env = std::fs::read_to_string(self.harness.join("env")).unwrap();
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .unwrap_or_else(|| panic!("{name} is not in the harness env file:\n{env}"))
            .to_string()
    }
}

impl Drop for FreshCluster {
    fn drop(&mut self) {
        let _ = Command::new(HARNESS)
            .arg("down")
            .arg("--dir")
            .arg(&self.harness)
            .output();
    }
}
