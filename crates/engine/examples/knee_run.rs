//! Run a shard from a spec JSON file and print its summary JSON (for quick measurements).
//!
//! `cargo run --release -p knee-engine --example knee_run -- spec.json`

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: knee_run SPEC.json");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let spec = match knee_engine::Spec::from_json(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    match knee_engine::run(spec) {
        Ok(r) => println!("{}", r.summary_json()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
