//! The live Helm release record (what a plan compares the operator's rendered release with) and
//! Helm's storage encoding. The cluster crate reads the Secret; a snapshot carries the record.
//!
//! Helm 3's default storage driver keeps each revision in a Secret `sh.helm.release.v1.<name>.v<N>`
//! in the release namespace, labelled `owner=helm`, `name=<name>`, `version=<N>`, `status=<status>`;
//! its `release` key holds the release as JSON, gzip-compressed, then base64-encoded (helm's
//! `pkg/storage/driver/util.go`, `encodeRelease`). The JSON's `config` is the values the user
//! supplied, which is exactly what `helm upgrade --install --values FILE` replaces.

use std::io::Read;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The newest revision of a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveRelease {
    /// Revision number.
    pub revision: u64,
    /// Helm status (`deployed`, `failed`, `pending-upgrade`, ...).
    pub status: String,
    /// Chart name.
    pub chart: String,
    /// Chart version.
    pub chart_version: String,
    /// The values the release was installed or upgraded with (`{}` when none).
    pub values: Value,
}

/// A Helm release found by its chart: `gpuctl import` looks for the GPU Operator, the Network
/// Operator and Kueue under any release name, in any namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedRelease {
    /// Release name (`helm list`'s NAME).
    pub name: String,
    /// Namespace of the release's storage Secrets.
    pub namespace: String,
    /// Its newest revision.
    #[serde(flatten)]
    pub release: LiveRelease,
}

/// A Helm release gpuctl installed for a blueprint, as recorded on its storage Secrets
/// ([`crate::applyset::BLUEPRINT_LABEL`] and [`crate::names::STACK_LABEL`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnedRelease {
    /// Release name and namespace, and its newest revision.
    #[serde(flatten)]
    pub named: NamedRelease,
    /// The stack the label names.
    pub stack: crate::render::Stack,
    /// The objects of the stack's API groups in the cluster (`Kind/ns/name`), read only for a
    /// release whose stack the blueprint dropped: they keep its uninstall from running.
    #[serde(skip)]
    pub objects: super::Reading<Vec<String>>,
}

/// Helm's encoding, undone: base64 text of (optionally, for releases stored before Helm
/// compressed them) gzip-compressed JSON.
pub fn decode(data: &[u8]) -> Result<Value, String> {
    let text: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&text)
        .map_err(|e| format!("not base64: {e}"))?;
    let json = if bytes.starts_with(&[0x1f, 0x8b, 0x08]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .take(MAX_RELEASE_BYTES)
            .read_to_end(&mut out)
            .map_err(|e| format!("not gzip: {e}"))?;
        out
    } else {
        bytes
    };
    serde_json::from_slice(&json).map_err(|e| format!("not JSON: {e}"))
}

/// Bound on a decompressed release (a Secret holds at most 1 MiB compressed; a release far beyond
/// this is not one gpuctl wrote, and is refused rather than inflated without limit).
const MAX_RELEASE_BYTES: u64 = 64 * 1024 * 1024;

pub fn from_release_json(revision: u64, r: &Value) -> LiveRelease {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    LiveRelease {
        revision,
        status: text(&r["info"]["status"]),
        chart: text(&r["chart"]["metadata"]["name"]),
        chart_version: text(&r["chart"]["metadata"]["version"]),
        values: match &r["config"] {
            Value::Object(_) => r["config"].clone(),
            _ => Value::Object(Default::default()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn encode(json: &Value, gzip: bool) -> Vec<u8> {
        let raw = serde_json::to_vec(json).unwrap();
        let bytes = if gzip {
            let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            w.write_all(&raw).unwrap();
            w.finish().unwrap()
        } else {
            raw
        };
        base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .into_bytes()
    }

    #[test]
    fn decodes_compressed_and_legacy_releases() {
        let r = serde_json::json!({"name": "gpu-operator", "version": 3, "info": {"status": "deployed"},
            "chart": {"metadata": {"name": "gpu-operator", "version": "v26.7.0"}},
            "config": {"driver": {"version": "580.95.05"}}});
        for gzip in [true, false] {
            let v = decode(&encode(&r, gzip)).unwrap();
            let live = from_release_json(3, &v);
            assert_eq!(live.chart_version, "v26.7.0");
            assert_eq!(live.status, "deployed");
            assert_eq!(live.values["driver"]["version"], "580.95.05");
        }
    }

    #[test]
    fn a_release_without_values_has_empty_values() {
        let r = serde_json::json!({"info": {"status": "failed"}, "chart": {"metadata": {"name": "c", "version": "1"}}, "config": null});
        assert_eq!(
            from_release_json(1, &r).values,
            Value::Object(Default::default())
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            &b"%%%"[..],
            b"aGVsbG8=",
            b"H4sI",
            &encode(&serde_json::json!(1), true)[..10],
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
    }
}
