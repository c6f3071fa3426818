//! Resolved settings: flags, environment, config file and defaults combined in one place.
//!
//! Precedence, highest first: command-line flags, `TOOLSMITH_*` environment
//! variables, the config file, then the defaults (`Limits::recommended()`,
//! `DEFAULT_ENV_ALLOW`, backend `auto`). Each layer is read into the same
//! [`Options`] shape, and [`Combine`] merges them; nothing else decides precedence.
//!
//! The limits of a call to one tool add the tool's `[tools.NAME]` section as
//! a layer between the flags and the environment:
//! `run` flags, then `[tools.NAME]`, then `TOOLSMITH_*`, then `[limits]`, then the defaults.
//! The flags and the tool's section
//! become the registry's `ToolOverride` for that tool, so they also beat the
//! timeout the tool requests for itself (an operator's decision about this
//! tool), while the environment and `[limits]` are the base that a requested
//! timeout (capped by `max_timeout`) replaces. A tool's `env.allow` replaces
//! the global list, as `[env] allow` replaces the default one; its `env.set`
//! is laid over `[env] set` key by key.

mod combine;
mod file;
mod limits;
mod masks;
mod options;
mod project;
mod report;
mod resolve;
mod schema;
mod values;

pub(crate) use crate::settings::combine::Combine;
pub(crate) use crate::settings::file::{
    ConfigError, ConfigFile, PROJECT_CONFIG, RawTrustOptions, load, load_bytes, user_config_path,
};
pub(crate) use crate::settings::limits::{LIMIT_KEYS, LimitKey, limits_reference};
#[cfg(test)]
pub(crate) use crate::settings::options::ConfigDir;
pub(crate) use crate::settings::options::{EnvOptions, Options, SandboxOptions};
pub(crate) use crate::settings::project::Project;
pub(crate) use crate::settings::report::{Effective, Origin, limits_json};
pub(crate) use crate::settings::resolve::{ConfigLayers, GlobalSettings, RunSettings};
pub(crate) use crate::settings::schema::config_schema;
