//! Rendering speed on the Galera template of the Go oracle's `bench.sh` (the if/else ConfigMap with
//! the `untilStep` gcomm:// address list), the typical KUDO resource template.
//!
//! `cargo bench -p kudo-template --bench render [-- N]` (default N = 10000) prints, per render:
//! (a) parse once + execute N times — what KUDO-rs does per operator package;
//! (b) parse + execute each time — what KUDO v0.19 (and the oracle's `--repeat`) does.
//! The output is checked against the oracle's golden first, so the timing is of a correct render.
//! scripts/bench-template.sh runs this next to the oracle and prints the ratios.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use kudo_template::{FuncEnv, Template, Value, kudo_funcs};

fn main() {
    // `cargo bench` passes `--bench`; the first numeric argument is N.
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/oracle");
    let text = std::fs::read_to_string(corpus.join("galera-firstboot.tmpl")).expect("bench template");
    let golden = std::fs::read_to_string(corpus.join("galera-firstboot.out")).expect("oracle golden");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("data.json")).expect("bench data"))
            .expect("json");
    let data = Value::from_json(&json);
    let funcs = kudo_funcs();

    let tpl = match Template::parse("tpl", &text, &funcs) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bench template does not parse: {e}");
            std::process::exit(1);
        }
    };
    match tpl.execute(&data, &mut FuncEnv::with_seed(0)) {
        Ok(out) if out == golden => {}
        Ok(out) => {
            eprintln!("bench output differs from the oracle's golden:\n{out}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("bench template fails: {e}");
            std::process::exit(1);
        }
    }

    // Warm-up (allocator, caches), not timed.
    for _ in 0..n.min(1000) {
        black_box(tpl.execute(&data, &mut FuncEnv::with_seed(0)).ok());
    }

    let start = Instant::now();
    let tpl = Template::parse("tpl", black_box(&text), &funcs).expect("parsed above");
    for _ in 0..n {
        let mut env = FuncEnv::with_seed(0);
        black_box(tpl.execute(black_box(&data), &mut env).ok());
    }
    let a = start.elapsed();

    let start = Instant::now();
    for _ in 0..n {
        let tpl = Template::parse("tpl", black_box(&text), &funcs).expect("parsed above");
        let mut env = FuncEnv::with_seed(0);
        black_box(tpl.execute(black_box(&data), &mut env).ok());
    }
    let b = start.elapsed();

    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!("kudo-template: {n} renders of the oracle bench template");
    println!(
        "parse once + execute: {:.3} s  {:.2} us/render",
        a.as_secs_f64(),
        per(a)
    );
    println!(
        "parse + execute each: {:.3} s  {:.2} us/render",
        b.as_secs_f64(),
        per(b)
    );
}
