//! Writing a [`RenderedSet`] as text: multi-document YAML for stdout, the Helm values and the node
//! patches (the binary writes the tree for GitOps: `src/output/tree.rs`).

use serde::Serialize;

use super::RenderedSet;

/// Canonical YAML of any value: block style, literal blocks for multi-line strings, no folding.
pub fn yaml<T: Serialize>(value: &T) -> String {
    let opts = serde_saphyr::ser_options! {
        folded_wrap_chars: usize::MAX,
    };
    serde_saphyr::to_string_with_options(value, opts).expect("JSON values always serialise")
}

impl RenderedSet {
    /// Every object as one multi-document YAML stream, in order. Same set, same bytes.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for o in &self.objects {
            out.push_str("---\n");
            out.push_str(&yaml(&o.manifest));
        }
        out
    }

    /// The Helm values file's text.
    pub fn helm_values_yaml(&self) -> String {
        let h = &self.helm;
        let chart = h.chart_reference();
        format!(
            "# GPU Operator values rendered by gpuctl from blueprint `{}` (install: {}).\n\
             # helm upgrade --install {} {} --version {} --namespace {} -f gpu-operator-values.yaml\n{}",
            self.blueprint,
            h.install,
            h.release,
            chart,
            h.version,
            h.namespace,
            yaml(&h.values)
        )
    }

    /// The node patches as YAML (labels and taints per pool, which no manifest carries).
    pub fn node_patches_yaml(&self) -> String {
        format!(
            "# Node labels and taints gpuctl manages per pool (applied per key by `gpuctl apply`).\n{}",
            yaml(&self.node_patches)
        )
    }
}
