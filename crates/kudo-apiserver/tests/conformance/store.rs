//! The in-process Store API.
