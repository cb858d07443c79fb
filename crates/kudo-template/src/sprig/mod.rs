//! Sprig v2.22 function names as KUDO exposes them (owned by the Sprig work).

use std::sync::{Arc, OnceLock};

use crate::func::FuncMap;

/// The function map KUDO v0.19 renders with: Sprig's names minus `env expandenv base dir clean ext
/// isAbs`, plus `toYaml`. Built once per process.
pub fn kudo_funcs() -> Arc<FuncMap> {
    static FUNCS: OnceLock<Arc<FuncMap>> = OnceLock::new();
    FUNCS.get_or_init(|| Arc::new(FuncMap::new())).clone()
}
