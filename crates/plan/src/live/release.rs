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
/// ([`gpuctl_model::applyset::BLUEPRINT_LABEL`] and [`gpuctl_model::names::STACK_LABEL`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnedRelease {
    /// Release name and namespace, and its newest revision.
    #[serde(flatten)]
    pub named: NamedRelease,
    /// The stack the label names.
    pub stack: gpuctl_pipeline::render::Stack,
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

/// Helm's encoding of a release, as [`decode`] undoes it: the JSON, gzip-compressed, then
/// base64-encoded (the bytes of the storage Secret's `release` key).
pub fn encode(release: &Value) -> Vec<u8> {
    use std::io::Write;
    let json = serde_json::to_vec(release).unwrap_or_default();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = gz.write_all(&json);
    let bytes = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .encode(bytes)
        .into_bytes()
}

/// The annotation helm reads in a release's stored manifest to leave a resource in place when it
/// uninstalls the release (a chart's own way to keep its CRDs).
pub const RESOURCE_POLICY: &str = "helm.sh/resource-policy";

/// Marks every CustomResourceDefinition in a release's stored manifest (`release["manifest"]`:
/// helm's `---`-separated documents, each after its `# Source:` comment) with
/// [`RESOURCE_POLICY`]`: keep`, as a chart that keeps its CRDs ships them, so `helm uninstall` of
/// the release leaves them (helm decides from the stored manifest, not the live objects). A
/// marked document is written back as JSON (which is YAML) after its comment lines. Returns the
/// CRDs newly marked; other documents are left byte for byte.
pub fn keep_crds(release: &mut Value) -> Vec<String> {
    let Some(manifest) = release["manifest"].as_str() else {
        return vec![];
    };
    let mut marked = Vec::new();
    let mut docs: Vec<String> = Vec::new();
    for doc in split_documents(manifest) {
        if !doc.contains("CustomResourceDefinition") {
            docs.push(doc.to_string());
            continue;
        }
        let Ok(mut v) = serde_saphyr::from_str::<Value>(doc) else {
            docs.push(doc.to_string());
            continue;
        };
        let annotations = &v["metadata"]["annotations"];
        if v["kind"] != "CustomResourceDefinition" || annotations[RESOURCE_POLICY] == "keep" {
            docs.push(doc.to_string());
            continue;
        }
        if !annotations.is_object() {
            v["metadata"]["annotations"] = serde_json::json!({});
        }
        v["metadata"]["annotations"][RESOURCE_POLICY] = Value::String("keep".into());
        marked.push(
            v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        let comments: String = doc
            .lines()
            .take_while(|l| l.trim_start().starts_with('#') || l.trim().is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        docs.push(format!(
            "{comments}{}\n",
            serde_json::to_string(&v).unwrap_or_default()
        ));
    }
    if !marked.is_empty() {
        release["manifest"] = Value::String(docs.join("---\n"));
    }
    marked
}

/// A manifest's documents, split at `---` lines (the text between them, separator lines left
/// out; the first document may be empty).
fn split_documents(manifest: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    for line in manifest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            out.push(&manifest[start..pos]);
            start = pos + line.len();
        }
        pos += line.len();
    }
    out.push(&manifest[start..]);
    out
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

    #[test]
    fn the_stored_manifest_keeps_its_crds_and_nothing_else_changes() {
        let manifest = "---\n# Source: kueue/templates/crd/cq.yaml\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: clusterqueues.kueue.x-k8s.io\n  annotations:\n    controller-gen.kubebuilder.io/version: v0.18.0\nspec:\n  group: kueue.x-k8s.io\n---\n# Source: kueue/templates/manager/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kueue-manager-config\ndata:\n  note: \"a CustomResourceDefinition is mentioned\"\n---\n# Source: kueue/templates/crd/kept.yaml\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: kept.kueue.x-k8s.io\n  annotations:\n    helm.sh/resource-policy: keep\n";
        let mut r = serde_json::json!({"name": "kueue", "manifest": manifest, "version": 1});
        assert_eq!(keep_crds(&mut r), ["clusterqueues.kueue.x-k8s.io"]);
        let docs = split_documents(r["manifest"].as_str().unwrap());
        assert_eq!(docs.len(), 4, "{docs:?}");
        assert!(
            docs[1].starts_with("# Source: kueue/templates/crd/cq.yaml\n{"),
            "{}",
            docs[1]
        );
        let crd: Value = serde_saphyr::from_str(docs[1]).unwrap();
        assert_eq!(crd["metadata"]["annotations"][RESOURCE_POLICY], "keep");
        assert_eq!(
            crd["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"],
            "v0.18.0"
        );
        assert_eq!(crd["spec"]["group"], "kueue.x-k8s.io");
        // The other documents, byte for byte.
        let before = split_documents(manifest);
        assert_eq!((docs[2], docs[3]), (before[2], before[3]));
        // Encoded as helm stores it, and read back.
        assert_eq!(decode(&super::encode(&r)).unwrap(), r);
        // Marked once: nothing more to mark.
        assert!(keep_crds(&mut r).is_empty());
        assert!(keep_crds(&mut serde_json::json!({"manifest": 3})).is_empty());
    }
}
