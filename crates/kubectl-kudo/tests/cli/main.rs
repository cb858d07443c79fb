//! The CLI's integration tests, one module per area, in one test binary: cargo links the
//! binary once instead of once per file (a file each was 25 links of the whole CLI, minutes of a
//! CI run), and the tests of every area share the harness's threads instead of running file after
//! file. Run one area with `cargo test -p kubectl-kudo --test cli seeds::` (a name filter).

mod common;
mod migrate_cli;

mod argocd_health;
mod autopilot_cli;
mod catalog;
mod dev_cli;
mod diagnostics;
mod exec_cli;
mod faults;
mod fixtures_cli;
mod gitops_cli;
mod init_cli;
mod inprocess;
mod kudo_semantics;
mod kuttl_cli;
mod least_privilege_cli;
mod manager_cli;
mod oci_cli;
mod ownership_cli;
mod package_cli;
mod package_graph_cli;
mod params_schema_cli;
mod preview_cli;
mod rbac_cli;
mod repo_cli;
mod retry_cli;
mod rollback_cli;
mod rollout_cli;
mod schedule_cli;
mod seeds;
mod sensitive_cli;
mod shell_audit;
mod sources_cli;
mod template_cli;
mod typed_api_cli;
mod ui_browser;
mod ui_cli;
mod wait_cli;
mod waiting_cli;
