//! `toYaml`: output identical to Go's gopkg.in/yaml.v2 `Marshal` (owned by the Sprig work).
