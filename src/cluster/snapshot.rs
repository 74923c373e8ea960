//! Snapshots: the live objects a blueprint touches, captured by `gpuctl snapshot` so CI can plan
//! without cluster credentials. A snapshot is a versioned JSON file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the snapshot file format. 2 added `helm_release` and `upgrade_journals`; a version 1
/// snapshot did not capture them, so its plans cannot say what the Helm step changes or see
/// driver upgrades.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 2;

/// Live state as captured.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    /// Format version; readers refuse newer ones.
    pub format_version: u32,
    /// Cluster fingerprint at capture time.
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// Server URL at capture time.
    #[serde(default)]
    pub server: Option<String>,
    /// Objects by key (`apiVersion|kind|namespace|name`).
    pub objects: BTreeMap<String, Value>,
    /// Kinds the cluster served at capture time (`apiVersion|kind`).
    #[serde(default)]
    pub served_kinds: Vec<String>,
    /// Nodes (metadata and spec.taints only).
    #[serde(default)]
    pub nodes: Vec<Value>,
    /// The operator's Helm release (chart, status and the values it was given), when the
    /// blueprint installs it with helm and it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_release: Option<super::helm::LiveRelease>,
    /// The blueprint's `gpuctl upgrade` journals, so snapshot plans refuse what live plans refuse
    /// (a pool an upgrade is moving, or moved to a driver the blueprint does not declare yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgrade_journals: Vec<crate::upgrade::journal::Journal>,
}

/// Why a snapshot could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Unreadable file.
    #[error("cannot read snapshot `{path}`: {source}")]
    Read {
        /// File.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not a snapshot.
    #[error(
        "`{path}` is not a gpuctl snapshot: {message}; capture one with `gpuctl snapshot BLUEPRINT --out FILE`"
    )]
    Parse {
        /// File.
        path: String,
        /// Why.
        message: String,
    },
}

/// The lookup key of an object.
pub fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{api_version}|{kind}|{}|{name}", namespace.unwrap_or(""))
}

impl Snapshot {
    /// Reads a snapshot file.
    pub fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SnapshotError::Read {
            path: p.clone(),
            source,
        })?;
        let snap: Snapshot = serde_json::from_str(&text).map_err(|e| SnapshotError::Parse {
            path: p.clone(),
            message: e.to_string(),
        })?;
        if snap.format_version > SNAPSHOT_FORMAT_VERSION {
            return Err(SnapshotError::Parse {
                path: p,
                message: format!(
                    "format version {} is newer than this gpuctl understands ({SNAPSHOT_FORMAT_VERSION})",
                    snap.format_version
                ),
            });
        }
        Ok(snap)
    }

    /// The object at a key, if captured.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&Value> {
        self.objects.get(&key(api_version, kind, namespace, name))
    }

    /// Whether the kind was served; unknown when the snapshot recorded no kinds.
    pub fn serves(&self, api_version: &str, kind: &str) -> bool {
        self.served_kinds.is_empty()
            || self
                .served_kinds
                .iter()
                .any(|k| *k == format!("{api_version}|{kind}"))
    }

    /// Captured members of an ApplySet (objects labelled part-of `id`).
    pub fn members(&self, id: &str) -> Vec<&Value> {
        self.objects
            .values()
            .filter(|o| o["metadata"]["labels"][crate::applyset::PART_OF] == id)
            .collect()
    }

    /// JSON text (pretty, trailing newline), deterministic.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}
