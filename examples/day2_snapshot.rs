//! Writes the generated Day-2 diagnostics snapshot the doctor and status benchmarks read, for
//! measuring the `gpuctl` binary on it: `cargo run --release --example day2_snapshot FILE [example]`
//! (default: issue 16's 1,000 GPU nodes, 20,000 pods and 5,000 events; `example`: the shipped
//! example's 20 nodes). Then `gpuctl doctor blueprints/dgx-h100-training.yaml --snapshot FILE`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, size) = match args.as_slice() {
        [p] => (p, gpuctl_core::testgen::day2::Size::BENCH),
        [p, s] if s == "example" => (p, gpuctl_core::testgen::day2::Size::EXAMPLE),
        _ => {
            eprintln!("usage: day2_snapshot FILE [example]");
            std::process::exit(64);
        }
    };
    let json = gpuctl_core::testgen::day2::snapshot(size).to_json();
    std::fs::write(path, json).expect("writes the snapshot");
}
