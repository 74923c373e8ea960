//! Fleets in a temporary directory, for the tests of `gpuctl fleet`: the example fleet
//! (`blueprints/fleet/`) copied whole or in part, or one a test writes (a base blueprint, cluster
//! files that extend it, `fleet.yaml`), optionally inside a repository (a `.git` marker: the root
//! that bounds a cluster's `extends` chain), and the one kubeconfig that names a context per
//! cluster.
//!
//! ```ignore
//! let d = FleetRepo::new().example("").build();                  // the example fleet at the root
//! let repo = FleetRepo::new().git().example("fleet").build();    // under fleet/ in a repository
//! let repo = FleetRepo::new()
//!     .git()
//!     .file("base.yaml", BASE)
//!     .cluster("east", "")                                       // clusters/east.yaml extends ../base.yaml
//!     .file("fleet.yaml", FLEET)
//!     .build();
//! ```
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// A base blueprint for fleets a test writes: one training pool of two H100 nodes, the GPU
/// Operator declared but not installed (`install: none`), tenant `team-a` with 8 GPUs.
pub const BASE: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: base
spec:
  kubernetes:
    version: \"1.35.1\"
  gpuOperator:
    version: v26.7.0
    namespace: gpu-operator
    install: none
    driver:
      version: \"580.173.02\"
      kernelModuleType: open
  nodePools:
    - name: train
      role: training
      selector: { gpuctl.dev/pool: train }
      nodes: 2
      gpu: { model: H100-SXM5-80GB, count: 8 }
  tenants:
    - name: team-a
      namespaces: [team-a]
      quota: { nvidia.com/gpu: 8 }
";

/// The example fleet in the repository.
pub fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("blueprints/fleet")
}

/// A fleet being written into a fresh temporary directory.
pub struct FleetRepo {
    dir: tempfile::TempDir,
}

impl FleetRepo {
    /// An empty temporary directory.
    pub fn new() -> FleetRepo {
        FleetRepo {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// Marks the directory as a repository's root (`.git`), which bounds `extends` chains.
    pub fn git(self) -> FleetRepo {
        std::fs::create_dir(self.dir.path().join(".git")).expect("create .git");
        self
    }

    /// The example fleet (`blueprints/fleet/`) copied to `rel` (`""`: the directory itself).
    pub fn example(self, rel: &str) -> FleetRepo {
        copy_dir(&example_dir(), &self.dir.path().join(rel));
        self
    }

    /// `text` written to `rel`, its directories created.
    pub fn file(self, rel: &str, text: &str) -> FleetRepo {
        write(self.dir.path(), rel, text);
        self
    }

    /// `clusters/<name>.yaml`: a ClusterBlueprint named `name` that extends `../base.yaml`, with
    /// `rest` (YAML from `spec:` on, or empty) after its metadata.
    pub fn cluster(self, name: &str, rest: &str) -> FleetRepo {
        let text = format!(
            "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: ../base.yaml\nmetadata: {{ name: {name} }}\n{rest}"
        );
        self.file(&format!("clusters/{name}.yaml"), &text)
    }

    /// The directory, removed when dropped.
    pub fn build(self) -> tempfile::TempDir {
        self.dir
    }
}

impl Default for FleetRepo {
    fn default() -> FleetRepo {
        FleetRepo::new()
    }
}

/// Writes `text` to `dir/rel`, creating its directories.
pub fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Copies the tree `from` into `to` (created when missing).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// One kubeconfig at `out` with a context `ctx-<cluster>` per harness (its clusters and users
/// renamed apart), the first one current.
pub fn kubeconfig(harnesses: &[(&str, PathBuf)], out: &Path) {
    let first = harnesses.first().map(|(name, _)| *name).unwrap_or_default();
    let mut merged = json!({"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
        "contexts": [], "current-context": format!("ctx-{first}")});
    for (name, kc) in harnesses {
        let kc: Value = serde_saphyr::from_str(&std::fs::read_to_string(kc).unwrap()).unwrap();
        let mut cluster = kc["clusters"][0].clone();
        cluster["name"] = json!(name);
        let mut user = kc["users"][0].clone();
        user["name"] = json!(name);
        merged["clusters"].as_array_mut().unwrap().push(cluster);
        merged["users"].as_array_mut().unwrap().push(user);
        merged["contexts"].as_array_mut().unwrap().push(
            json!({"name": format!("ctx-{name}"), "context": {"cluster": name, "user": name}}),
        );
    }
    std::fs::write(out, serde_json::to_string_pretty(&merged).unwrap()).unwrap();
}
