//! One module per command group.

pub mod package;
pub mod template;
