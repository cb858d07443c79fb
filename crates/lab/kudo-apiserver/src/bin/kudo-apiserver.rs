//! Standalone server process:
//! `kudo-apiserver [--port N] [--data-dir DIR [--data-dir-sync always|never]] [--kubeconfig FILE]`.
//! With `--data-dir`, writes are `fsync`ed before they are acknowledged unless `--data-dir-sync never`.
//! Prints `listening on http://127.0.0.1:PORT` once ready and serves until SIGINT/SIGTERM.

use std::path::PathBuf;

fn usage() -> ! {
    eprintln!(
        "usage: kudo-apiserver [--port N] [--data-dir DIR [--data-dir-sync always|never]] [--kubeconfig FILE]"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let mut config = kudo_apiserver::Config::default();
    let mut kubeconfig: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--port" => config.port = value().parse().unwrap_or_else(|_| usage()),
            "--data-dir" => config.data_dir = Some(PathBuf::from(value())),
            "--data-dir-sync" => config.data_dir_sync = value().parse().unwrap_or_else(|_| usage()),
            "--kubeconfig" => kubeconfig = Some(PathBuf::from(value())),
            _ => usage(),
        }
    }
    let server = match kudo_apiserver::ApiServer::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kudo-apiserver: {e}");
            std::process::exit(1);
        }
    };
    if let Some(k) = kubeconfig
        && let Err(e) = server.write_kubeconfig(&k)
    {
        eprintln!("kudo-apiserver: writing {}: {e}", k.display());
        std::process::exit(1);
    }
    println!("listening on {}", server.url());
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("kudo-apiserver: {e}");
            std::process::exit(1);
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    server.shutdown().await;
}
