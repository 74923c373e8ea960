//! Prints a generated blueprint for benchmarks: `cargo run --example gen_blueprint [POOLS TENANTS NAMESPACES]`
//! (default: the 5,000-object benchmark blueprint, 64 pools and 500 tenants of 2 namespaces).

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let text = match args.as_slice() {
        [p, t, n] => gpuctl_core::testgen::blueprint(*p, *t, *n),
        _ => gpuctl_core::testgen::large_blueprint(),
    };
    print!("{text}");
}
