//! KUDO operator packages: reading (directory or `.tgz`, safe against hostile archives, leniently
//! as KUDO does) straight into the `kudo.dev/v1beta1` types, verification with KUDO's checks and
//! messages, the Operator/OperatorVersion/Instance of a package, and offline rendering of plans
//! into the exact objects the controller applies.
//!
//! Entry points: [`reader::read_path`] → [`model::Package`]; [`verify::verify`];
//! [`resources::to_resources`]; [`params`] for value validation and template typing;
//! [`render::render_plan`] and [`enhance::enhance`] (shared with the controller), [`live::render_live`]
//! for a render against a live cluster (the manager's and a preview's); [`schema`] for
//! parameter declarations as kube and JSON-Schema 2020-12 schemas.

pub mod argocd;
pub mod autopilot;
pub mod create;
pub mod deps_hash;
pub mod enhance;
pub mod error;
pub mod graph;
pub mod lenient;
pub mod list;
pub mod live;
pub mod model;
pub mod params;
pub mod reader;
pub mod render;
pub mod resources;
pub mod scaffold;
pub mod schema;
pub mod split;
mod tmpl;
pub mod translate;
pub mod typed_api;
pub mod verify;
pub mod yaml;

pub use error::PackageError;
pub use model::Package;
pub use reader::read_path;
pub use tmpl::pipes_for_plan;
