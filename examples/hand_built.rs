//! Writes the cluster a blueprint describes as a team would have built it by hand, for
//! `tools/bench-import`: `cargo run --example hand_built BLUEPRINT DIR` writes `DIR/namespaces.json`,
//! `DIR/objects.json` (every rendered object without gpuctl's labels) and `DIR/nodes.json`, each a
//! `kubectl apply -f` list.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [blueprint, dir] = args.as_slice() else {
        eprintln!("usage: hand_built BLUEPRINT DIR");
        std::process::exit(64);
    };
    let text = std::fs::read_to_string(blueprint).expect("reads the blueprint");
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let loaded = gpuctl_core::blueprint::load_str(blueprint, &text).expect("loads");
    let today = jiff::civil::date(2026, 11, 30);
    let v =
        gpuctl_core::validate::validate(loaded, catalog, gpuctl_core::validate::Options { today })
            .expect("validates");
    let set = gpuctl_core::render::render(&v, catalog, &gpuctl_core::render::Templates::embedded())
        .expect("renders");
    let list = |items: Vec<serde_json::Value>| {
        serde_json::to_vec(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .expect("serialises")
    };
    let (ns, rest): (Vec<_>, Vec<_>) = set.objects.iter().partition(|o| o.kind == "Namespace");
    let unowned = |o: &&gpuctl_core::render::RenderedObject| {
        gpuctl_core::import::fixture::unowned(&o.manifest)
    };
    let dir = std::path::Path::new(dir);
    std::fs::write(
        dir.join("namespaces.json"),
        list(ns.iter().map(unowned).collect()),
    )
    .expect("writes");
    std::fs::write(
        dir.join("objects.json"),
        list(rest.iter().map(unowned).collect()),
    )
    .expect("writes");
    std::fs::write(
        dir.join("nodes.json"),
        list(gpuctl_core::import::fixture::nodes(v.blueprint(), &set)),
    )
    .expect("writes");
}
