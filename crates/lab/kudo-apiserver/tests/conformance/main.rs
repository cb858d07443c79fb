//! Conformance tests: the real kubectl and kube-rs against the embedded API server.

mod util;

mod builtin;
mod faults;
mod fidelity;
mod kubectl;
mod kuberust;
mod selectors;
mod store;
mod strict;
